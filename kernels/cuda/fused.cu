// Fused decode kernels for T <= FUSED_T rows (batch <= 8): fewer launches, every SM streaming weights.
// Twins: kernels.cuda.twins.mlp_fused_twin / lm_head_argmax_twin.
//
//   mlp_fused:      RMSNorm prologue + gate/up + SwiGLU, a grid-wide barrier, then down + residual add,
//                   in ONE launch (today two). Phase 1: warp w computes the (gate_j, up_j) row pairs
//                   j = w, w + nwarps, ... of the interleaved gate/up matrix and stores bf16 act[t, j]
//                   (the same rounding as the two-kernel path). Phase 2: each block owns 2 output-column
//                   pairs of the down projection, 4 warps per pair each over a quarter of K (split-K
//                   inside the block, reduced in shared memory in a fixed order: deterministic), and
//                   adds the sum into the float32 residual. Both phases' weights are loaded into
//                   registers BEFORE waiting for the previous kernel (they are constants), so their
//                   DRAM latency overlaps the previous kernel's tail and the grid barrier.
//   lm_head_argmax: RMSNorm prologue + LM head (tied embedding) + greedy argmax. A persistent grid of
//                   16-column tiles (x staged once per block), a block-local argmax per row, one 64-bit atomicMax per row on the key
//                   (sortable logit bits << 32 | ~id: larger logit first, then the LOWER id, exactly
//                   kernels/sampler.py's greedy rule; max is order-independent, so deterministic); the
//                   last block to finish converts the keys to ids and resets them (self-cleaning).
//                   The logits are also stored when `logits` is non-null (sampled rows / logprobs).
//
// The grid barrier needs every block resident at once: the host sizes the grid at most the SM count
// times the occupancy (kernels.cuda.fused_plan checks it with cuOccupancyMaxActiveBlocksPerMultiprocessor).
#include "common.cuh"
#include "swiglu.cu"

#define FUSED_T 8
#define FUSED_WARPS 8
#define FUSED_THREADS (FUSED_WARPS * 32)
#define FUSED_MAX_K 768      // hidden <= 768: x staged in static shared memory, 3 uint4 per lane
#define K1_CHUNKS 3          // (FUSED_MAX_K / 8) / 32
#define MLP_P1_ITERS 2       // ffn <= 2 * grid * FUSED_WARPS
#define MLP_KSPLIT 4         // phase 2: warps per output-column pair
#define MLP_K2_CHUNKS 2      // ffn / MLP_KSPLIT / 8 <= 64 (ffn <= 2048)

// Sense-reversing grid barrier on one zero-initialised word, reusable across launches without a reset
// (the scheme of cooperative groups' grid sync; release/acquire at gpu scope instead of full fences):
// block 0 adds 0x80000000 - (G - 1), the others 1, so each full round adds exactly 0x80000000 (the top
// bit flips, the low bits come back); a block waits for the top bit to differ from what it saw.
__device__ __forceinline__ void grid_barrier(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {  // release: this block's writes (ordered by the bar.sync above) go first
        unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u, old, cur;
        asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(bar), "r"(nb) : "memory");
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(cur) : "l"(bar) : "memory");
        } while (((old ^ cur) & 0x80000000u) == 0);
    }
    __syncthreads();
}

// norm_w -> shared memory (a constant: call it before pdl_wait, so its latency hides there).
__device__ __forceinline__ void stage_norm_w(const float *norm_w, int K, float *nw_s) {
    for (int k4 = threadIdx.x; k4 < (K >> 2); k4 += FUSED_THREADS)
        reinterpret_cast<float4 *>(nw_s)[k4] = __ldg(reinterpret_cast<const float4 *>(norm_w) + k4);
}

// xs[t, :] = residual[rows[t], :] / rms * norm_w, float32 in shared memory. Every 16-byte load of the
// T rows is issued before the first is used (one round trip to L2, not one per loop iteration); the
// sums of squares are then taken from shared memory, one warp per row. rows_s: T row indices in shared.
#define STAGE_V4 ((FUSED_T * FUSED_MAX_K / 4 + FUSED_THREADS - 1) / FUSED_THREADS)
__device__ __forceinline__ void stage_norm(const float *residual, const int *rows_s, const float *nw_s, float eps,
                                           int K, int T, float *xs, float *rstd_s) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int k4n = K >> 2, n4 = T * k4n;
    float4 *xs4 = reinterpret_cast<float4 *>(xs);
    float4 v[STAGE_V4];
    __syncthreads();  // rows_s / nw_s were written by other threads
#pragma unroll
    for (int i = 0; i < STAGE_V4; i++) {
        int idx = tid + i * FUSED_THREADS;
        if (idx < n4) {
            int t = idx / k4n;
            v[i] = __ldcg(reinterpret_cast<const float4 *>(residual + (size_t)rows_s[t] * K) + (idx - t * k4n));
        }
    }
#pragma unroll
    for (int i = 0; i < STAGE_V4; i++) {
        int idx = tid + i * FUSED_THREADS;
        if (idx < n4) xs4[idx] = v[i];
    }
    __syncthreads();
    if (warp < T) {
        float ss = 0.f;
        for (int k4 = lane; k4 < k4n; k4 += 32) {
            float4 a = xs4[warp * k4n + k4];
            ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
        }
        ss = warp_sum(ss);
        if (lane == 0) rstd_s[warp] = 1.f / sqrtf(ss / (float)K + eps);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < STAGE_V4; i++) {
        int idx = tid + i * FUSED_THREADS;
        if (idx < n4) {
            int t = idx / k4n;
            float r = rstd_s[t];
            float4 a = xs4[idx], w = reinterpret_cast<const float4 *>(nw_s)[idx - t * k4n];
            xs4[idx] = make_float4(a.x * r * w.x, a.y * r * w.y, a.z * r * w.z, a.w * r * w.w);
        }
    }
    __syncthreads();
}

__device__ __forceinline__ float dot8(const float *w, const float4 &p, const float4 &q) {
    return w[0] * p.x + w[1] * p.y + w[2] * p.z + w[3] * p.w + w[4] * q.x + w[5] * q.y + w[6] * q.z + w[7] * q.w;
}

// Two rows (ra, rb: K1_CHUNKS uint4 per lane, chunk c = lane + 32 i) against the T staged rows of xs.
__device__ __forceinline__ void pair_dot(const uint4 *ra, const uint4 *rb, const float *xs, int K, int T,
                                         float *s0, float *s1) {
    int lane = threadIdx.x & 31, chunks = K >> 3;
    float acc0[FUSED_T], acc1[FUSED_T];
#pragma unroll
    for (int t = 0; t < FUSED_T; t++) acc0[t] = acc1[t] = 0.f;
#pragma unroll
    for (int i = 0; i < K1_CHUNKS; i++) {
        int c = lane + 32 * i;
        if (c < chunks) {
            float a[8], b[8];
            unpack8(ra[i], a);
            unpack8(rb[i], b);
#pragma unroll
            for (int t = 0; t < FUSED_T; t++) {
                if (t < T) {
                    const float4 *xr = reinterpret_cast<const float4 *>(xs + t * K + c * 8);
                    float4 p = xr[0], q = xr[1];
                    acc0[t] += dot8(a, p, q);
                    acc1[t] += dot8(b, p, q);
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < FUSED_T; t++) {
        if (t < T) {
            s0[t] = warp_sum(acc0[t]);
            s1[t] = warp_sum(acc1[t]);
        }
    }
}

__device__ __forceinline__ void load_rows(const bf16 *W, int row, int K, bool ok, uint4 *ra, uint4 *rb) {
    load_pair_rows<K1_CHUNKS>(W, row, K, ok, ra, rb);
}

// a K split's partial of one row of a column pair: the warp's sums of (a0, a1) to red2[0 .. 1] (lane 0 stores)
__device__ __forceinline__ void pair_partial(float *red2, int lane, float a0, float a1) {
    const float s0 = warp_sum(a0), s1 = warp_sum(a1);
    if (lane == 0) {
        red2[0] = s0;
        red2[1] = s1;
    }
}

#ifndef FUSED_HELPERS_ONLY  // (lean_mlp.cu takes the helpers above, not these kernels)
// residual float32 [T, H] (read, then += down(act)); Wgu bf16 [2F, H] interleaved (gate_j, up_j);
// Wd bf16 [H, F]; act bf16 [T, F] scratch; bar: one zero-initialised word. Grid G >= H / 4 blocks.
extern "C" __global__ void __launch_bounds__(FUSED_THREADS, 2)
mlp_fused(float *residual, const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ Wgu,
          const bf16 *__restrict__ Wd, bf16 *act, int H, int F, int T, unsigned *bar) {
    __shared__ __align__(16) float xs[FUSED_T * FUSED_MAX_K];
    __shared__ __align__(16) float nw_s[FUSED_MAX_K];
    __shared__ float rstd_s[FUSED_T];
    __shared__ int rows_s[FUSED_T];
    __shared__ float red[FUSED_WARPS][FUSED_T][2];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gw = blockIdx.x * FUSED_WARPS + warp, nw = gridDim.x * FUSED_WARPS;
    uint4 wg[MLP_P1_ITERS][K1_CHUNKS], wu[MLP_P1_ITERS][K1_CHUNKS];
#pragma unroll
    for (int i = 0; i < MLP_P1_ITERS; i++) {
        int j = gw + i * nw;
        load_rows(Wgu, 2 * j, H, j < F, wg[i], wu[i]);
    }
    const int pairs_per_block = FUSED_WARPS / MLP_KSPLIT;
    const int n0 = 2 * (blockIdx.x * pairs_per_block + warp / MLP_KSPLIT), s = warp % MLP_KSPLIT;
    const bool out_ok = n0 < H;
    const int kseg = F / MLP_KSPLIT, chunks2 = kseg >> 3;
    uint4 d0[MLP_K2_CHUNKS], d1[MLP_K2_CHUNKS];
    {
        const uint4 *r0 = reinterpret_cast<const uint4 *>(Wd + (size_t)(out_ok ? n0 : 0) * F + s * kseg);
        const uint4 *r1 = reinterpret_cast<const uint4 *>(Wd + (size_t)(out_ok ? n0 + 1 : 0) * F + s * kseg);
#pragma unroll
        for (int i = 0; i < MLP_K2_CHUNKS; i++) {
            int c = lane + 32 * i;
            if (out_ok && c < chunks2) {
                d0[i] = r0[c];
                d1[i] = r1[c];
            }
        }
    }
    stage_norm_w(norm_w, H, nw_s);
    if (tid < FUSED_T) rows_s[tid] = tid;
    pdl_wait();
    // the residual entries this thread updates in phase 2, loaded now (their round trip hides under
    // the staging's): only this thread writes them, after the barrier
    const bool adds = out_ok && s == 0 && lane < T;
    float r0 = 0.f, r1 = 0.f;
    if (adds) {
        r0 = __ldcg(residual + (size_t)lane * H + n0);
        r1 = __ldcg(residual + (size_t)lane * H + n0 + 1);
    }
    stage_norm(residual, rows_s, nw_s, eps, H, T, xs, rstd_s);
#pragma unroll
    for (int i = 0; i < MLP_P1_ITERS; i++) {
        int j = gw + i * nw;
        if (j < F) {
            float g[FUSED_T], u[FUSED_T];
            pair_dot(wg[i], wu[i], xs, H, T, g, u);
            if (lane == 0)
#pragma unroll
                for (int t = 0; t < FUSED_T; t++)
                    if (t < T) act[(size_t)t * F + j] = f2bf(silu_mul(g[t], u[t]));
        }
    }
    grid_barrier(bar);
    pdl_trigger();
    float a0[FUSED_T], a1[FUSED_T];
#pragma unroll
    for (int t = 0; t < FUSED_T; t++) a0[t] = a1[t] = 0.f;
    if (out_ok) {
#pragma unroll
        for (int i = 0; i < MLP_K2_CHUNKS; i++) {
            int c = lane + 32 * i;
            if (c < chunks2) {
                float wa[8], wb[8];
                unpack8(d0[i], wa);
                unpack8(d1[i], wb);
#pragma unroll
                for (int t = 0; t < FUSED_T; t++) {
                    if (t < T) {
                        uint4 xa = __ldcg(reinterpret_cast<const uint4 *>(act + (size_t)t * F + s * kseg) + c);
                        float xf[8];
                        unpack8(xa, xf);
                        float4 p = make_float4(xf[0], xf[1], xf[2], xf[3]), q = make_float4(xf[4], xf[5], xf[6], xf[7]);
                        a0[t] += dot8(wa, p, q);
                        a1[t] += dot8(wb, p, q);
                    }
                }
            }
        }
#pragma unroll
        for (int t = 0; t < FUSED_T; t++)
            if (t < T) pair_partial(red[warp][t], lane, a0[t], a1[t]);
    }
    __syncthreads();
    if (adds) {  // fixed order over the K splits: deterministic
        float y0 = 0.f, y1 = 0.f;
#pragma unroll
        for (int q = 0; q < MLP_KSPLIT; q++) {
            y0 += red[warp + q][lane][0];
            y1 += red[warp + q][lane][1];
        }
        float *o = residual + (size_t)lane * H + n0;
        o[0] = r0 + y0;
        o[1] = r1 + y1;
    }
}

__device__ __forceinline__ u64 argmax_key(float l, int id) {
    if (l != l) return 0ull;  // NaN never wins (as sample_rows' greedy branch)
    if (l == 0.f) l = 0.f;    // -0 and +0 tie
    u32 b = __float_as_uint(l);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((u64)b << 32) | (u64)(0xFFFFFFFFu - (u32)id);
}

// residual float32 [*, K] rows x_rows[t]; W bf16 [V, K], V % LM_TILE == 0. A persistent grid (the host
// passes about 2 blocks per SM): x is staged and normalised once per block, then the block walks the
// 16-column tiles blockIdx.x, blockIdx.x + gridDim.x, ... (one column pair per warp), the next tile's
// weights loaded while the current one is reduced. keys u64 [T] and *counter zero-initialised (the
// last block leaves them so); ids int32 [T]; logits float32 [T, V], or null to skip storing them.
#define LM_TILE (FUSED_WARPS * 2)
extern "C" __global__ void __launch_bounds__(FUSED_THREADS, 2)
lm_head_argmax(const float *residual, const int *__restrict__ x_rows, const float *__restrict__ norm_w, float eps,
               const bf16 *__restrict__ W, int V, int K, int T, float *logits, u64 *keys, unsigned *counter,
               int *ids) {
    __shared__ __align__(16) float xs[FUSED_T * FUSED_MAX_K];
    __shared__ __align__(16) float nw_s[FUSED_MAX_K];
    __shared__ float rstd_s[FUSED_T];
    __shared__ int rows_s[FUSED_T];
    __shared__ u64 best_s[FUSED_WARPS][FUSED_T];
    __shared__ bool last_s;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int ntiles = V / LM_TILE;
    uint4 wa[K1_CHUNKS], wb[K1_CHUNKS];
    int tile = blockIdx.x;
    load_rows(W, tile * LM_TILE + 2 * warp, K, tile < ntiles, wa, wb);
    stage_norm_w(norm_w, K, nw_s);
    // x_rows comes from a host copy ordered before this step's first kernel; no kernel writes it
    if (tid < T) rows_s[tid] = x_rows ? x_rows[tid] : tid;
    pdl_wait();
    pdl_trigger();
    stage_norm(residual, rows_s, nw_s, eps, K, T, xs, rstd_s);
    u64 best[FUSED_T];
#pragma unroll
    for (int t = 0; t < FUSED_T; t++) best[t] = 0ull;
    for (; tile < ntiles; tile += gridDim.x) {
        const int n = tile * LM_TILE + 2 * warp;
        uint4 na[K1_CHUNKS], nb[K1_CHUNKS];
        load_rows(W, n + gridDim.x * LM_TILE, K, tile + (int)gridDim.x < ntiles, na, nb);
        float s0[FUSED_T], s1[FUSED_T];
        pair_dot(wa, wb, xs, K, T, s0, s1);
#pragma unroll
        for (int t = 0; t < FUSED_T; t++) {
            if (t < T) {
                if (logits && lane == 0) {
                    logits[(size_t)t * V + n] = s0[t];
                    logits[(size_t)t * V + n + 1] = s1[t];
                }
                u64 k0 = argmax_key(s0[t], n), k1 = argmax_key(s1[t], n + 1);
                u64 k = k0 > k1 ? k0 : k1;
                best[t] = best[t] > k ? best[t] : k;
            }
        }
#pragma unroll
        for (int i = 0; i < K1_CHUNKS; i++) {
            wa[i] = na[i];
            wb[i] = nb[i];
        }
    }
    if (lane == 0)
#pragma unroll
        for (int t = 0; t < FUSED_T; t++) best_s[warp][t] = best[t];
    __syncthreads();
    if (tid < T) {
        u64 b = 0ull;
#pragma unroll
        for (int w = 0; w < FUSED_WARPS; w++) b = b > best_s[w][tid] ? b : best_s[w][tid];
        atomicMax(keys + tid, b);
        __threadfence();
    }
    __syncthreads();
    if (tid == 0) last_s = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last_s) {  // every other block's atomicMax happened before its counter increment
        __threadfence();
        if (tid < T) {
            u64 k = atomicExch(keys + tid, 0ull);
            ids[tid] = k ? (int)(0xFFFFFFFFu - (u32)(k & 0xFFFFFFFFull)) : 0;
        }
        if (tid == 0) atomicExch(counter, 0u);
    }
}
#endif  // FUSED_HELPERS_ONLY
