// Latency-lean decode kernels for T <= 8 rows (batch <= 8), selected by AOTX_LEAN=1 (fused_policy).
// Twins: kernels.cuda.lean_twins (qkv_lean_twin; attention + o_lean is fused_twins.attn_o_fused_twin).
//
// At T = 1 a decode kernel is bound by its chain of dependent round trips, not by bandwidth
// (docs/PERFORMANCE.md, issue 13 part 1). These kernels keep that chain as short as it can be:
// everything that is a constant of the step (weights, norm weights, positions, KV slots, RoPE
// cos/sin) is loaded BEFORE griddepcontrol.wait, so its latency hides under the previous kernel;
// after the wait there is one round trip for the activations, then arithmetic and the stores.
// The row count is a template bound TM in {1, 2, 4, 8} (the launcher picks the smallest TM >= T): one
// small kernel per bound, no per-row predicates in the hot loops (rows T..TM-1 repeat row T - 1, are
// computed and never stored).
//
//   qkv_lean_tT: RMSNorm + QKV + RoPE + paged K/V write. One warp per output column pair; each warp
//                reads the whole T x K activation rows straight from L2 into registers (16-byte loads)
//                and takes the sum of squares itself: no shared memory, no __syncthreads. The norm
//                weight is folded into the prefetched weights (w[k] * nw[k]); rstd scales the dot.
//   lean_attention: attention.cu's unit with ATT_CHUNK = LEAN_CHUNK keys a chunk (more, shorter splits)
//                and its first chunk's older K/V rows staged BEFORE the wait (attention.cu, PF);
//                it writes partials (o, m, l) and launches no combine.
//   o_lean_tT:   the split combine (attention_combine) as a prologue of the O projection, then the
//                residual add: the combine launch is gone. 8 warps, one O column pair each.
//   paged_attention_merged (AOTX_LEAN=2): the attention with the combine done by each group's last
//                split, for omlp_lean (lean_mlp.cu: O + residual + the MLP in one launch).
#ifndef LEAN_CHUNK
#define LEAN_CHUNK 64
#endif
#define ATT_CHUNK LEAN_CHUNK
#define ATTENTION_UNIT_ONLY
#include "attention.cu"
#include "kv_write.cu"
#include "rope.cu"

#define LEAN_MAX_K 768        // K <= 768 (hidden and n_heads * head_dim)
#define LEAN_CHUNKS 3         // (LEAN_MAX_K / 8) / 32 16-byte pieces per lane
#define LEAN_QKV_WARPS 4
#define LEAN_O_WARPS 8
#define LEAN_O_THREADS (LEAN_O_WARPS * 32)
#define LEAN_MAX_SPLITS 8
#define MERGE_MAX_SPLITS 16   // paged_attention_merged: kernels.cuda.backend.MAX_SPLITS
#define LEAN_O_BATCH 3        // combine elements a thread holds in flight at once

__device__ __forceinline__ void fma8(float *acc, const float *w, const float4 &p, const float4 &q) {
    *acc += w[0] * p.x + w[1] * p.y + w[2] * p.z + w[3] * p.w + w[4] * q.x + w[5] * q.y + w[6] * q.z + w[7] * q.w;
}

// residual float32 [T, K]; W bf16 [N, K] = [q | k | v] rows; q_out float32 [T, q_size]; caches bf16
// [slots, kv_size]; rope float2 [positions, head_dim / 2]; positions, slots int32 [T] (host-staged
// before the step's first kernel: read before the wait). Grid N / (2 * LEAN_QKV_WARPS).
template <int TM>
__device__ __forceinline__ void qkv_lean_body(int T, const float *residual, const float *__restrict__ norm_w, float eps,
                                              const bf16 *__restrict__ W, int N, int K,
                                              const int *__restrict__ positions, const float2 *__restrict__ rope,
                                              const int *__restrict__ slots, float *q_out, bf16 *k_cache,
                                              bf16 *v_cache, int head_dim, int q_size, int kv_size) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n0 = (blockIdx.x * LEAN_QKV_WARPS + warp) * 2;
    if (n0 >= N) return;
    const int chunks = K >> 3;
    float wa[LEAN_CHUNKS][8], wb[LEAN_CHUNKS][8];
    {
        const uint4 *w0 = reinterpret_cast<const uint4 *>(W + (size_t)n0 * K);
        const uint4 *w1 = reinterpret_cast<const uint4 *>(W + (size_t)(n0 + 1) * K);
        const float4 *nw4 = reinterpret_cast<const float4 *>(norm_w);
#pragma unroll
        for (int i = 0; i < LEAN_CHUNKS; i++) {
            const int c = lane + 32 * i;
            uint4 a = make_uint4(0, 0, 0, 0), b = a;
            float4 g0 = make_float4(0.f, 0.f, 0.f, 0.f), g1 = g0;
            if (c < chunks) {
                a = w0[c];
                b = w1[c];
                g0 = __ldg(nw4 + 2 * c);
                g1 = __ldg(nw4 + 2 * c + 1);
            }
            unpack8(a, wa[i]);
            unpack8(b, wb[i]);
            const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                wa[i][j] *= g[j];
                wb[i][j] *= g[j];
            }
        }
    }
    // this lane's row (lane < T): position, slot and the column pair's RoPE rotation
    const int qk = q_size + kv_size;
    int slot = -1;
    float2 cs = make_float2(1.f, 0.f);
    if (lane < T) {
        slot = slots[lane];
        if (n0 < qk) cs = rope[(size_t)positions[lane] * (head_dim >> 1) + ((n0 % head_dim) >> 1)];
    }
    pdl_wait();
    pdl_trigger();
    float ss[TM], acc0[TM], acc1[TM];
#pragma unroll
    for (int t = 0; t < TM; t++) {  // (rows >= T repeat row T - 1: never stored)
        const float4 *xr = reinterpret_cast<const float4 *>(residual + (size_t)min(t, T - 1) * K);
        float4 p[LEAN_CHUNKS], q[LEAN_CHUNKS];
#pragma unroll
        for (int i = 0; i < LEAN_CHUNKS; i++) {
            const int c = lane + 32 * i;
            p[i] = q[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (c < chunks) {
                p[i] = __ldcg(xr + 2 * c);
                q[i] = __ldcg(xr + 2 * c + 1);
            }
        }
        ss[t] = acc0[t] = acc1[t] = 0.f;
#pragma unroll
        for (int i = 0; i < LEAN_CHUNKS; i++) {
            ss[t] += p[i].x * p[i].x + p[i].y * p[i].y + p[i].z * p[i].z + p[i].w * p[i].w +
                     q[i].x * q[i].x + q[i].y * q[i].y + q[i].z * q[i].z + q[i].w * q[i].w;
            fma8(&acc0[t], wa[i], p[i], q[i]);
            fma8(&acc1[t], wb[i], p[i], q[i]);
        }
    }
    float v0 = 0.f, v1 = 0.f, s = 0.f;  // lane t keeps row t's sums
#pragma unroll
    for (int t = 0; t < TM; t++) {
        const float a = warp_sum(acc0[t]), b = warp_sum(acc1[t]), c = warp_sum(ss[t]);
        if (lane == t) {
            v0 = a;
            v1 = b;
            s = c;
        }
    }
    if (lane >= T) return;
    const float rstd = 1.f / sqrtf(s / (float)K + eps);
    v0 *= rstd;
    v1 *= rstd;
    if (n0 < qk) rope_pair(v0, v1, cs);
    if (n0 < q_size) {
        float *o = q_out + (size_t)lane * q_size + n0;
        o[0] = v0;
        o[1] = v1;
    } else if (slot >= 0) {
        kv_store_pair(n0 < qk ? k_cache : v_cache, slot, kv_size, (n0 - q_size) % kv_size, v0, v1);
    }
}

// residual float32 [T, H] += attn @ Wo^T, with attn [T, K = n_heads * ATT_D] the combined attention
// (nsplit > 1: partials part_o [T, n_heads, nsplit, ATT_D], part_ml [T, n_heads, nsplit, 2] of
// paged_attention; nsplit == 1: attn bf16 [T, K] as paged_attention stored it), rounded to bf16 as
// attention_combine stores it. Grid H / (2 * LEAN_O_WARPS).
template <int TM>
__device__ __forceinline__ void o_lean_body(int T, const bf16 *attn, const float *part_o, const float *part_ml, int nsplit,
                                            int n_heads, const bf16 *__restrict__ Wo, float *residual, int H) {
    __shared__ __align__(16) float xs[TM * LEAN_MAX_K];
    __shared__ float ml_s[TM * 16 * LEAN_MAX_SPLITS * 2];  // (m, l) per (t, head <= 16, split)
    __shared__ float w_s[TM * 16 * (LEAN_MAX_SPLITS + 1)];  // exp(m_s - m) per split, then l
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int K = n_heads * ATT_D, chunks = K >> 3, n_el = T * K, n_th = T * n_heads;
    const int n0 = 2 * (blockIdx.x * LEAN_O_WARPS + warp);
    const bool out_ok = n0 < H;
    uint4 wa[LEAN_CHUNKS], wb[LEAN_CHUNKS];
    {
        const uint4 *w0 = reinterpret_cast<const uint4 *>(Wo + (size_t)(out_ok ? n0 : 0) * K);
        const uint4 *w1 = reinterpret_cast<const uint4 *>(Wo + (size_t)(out_ok ? n0 + 1 : 0) * K);
#pragma unroll
        for (int i = 0; i < LEAN_CHUNKS; i++) {
            const int c = lane + 32 * i;
            wa[i] = wb[i] = make_uint4(0, 0, 0, 0);
            if (out_ok && c < chunks) {
                wa[i] = w0[c];
                wb[i] = w1[c];
            }
        }
    }
    pdl_wait();
    pdl_trigger();
    const bool adds = out_ok && lane < T;
    float r0 = 0.f, r1 = 0.f;
    if (adds) {
        r0 = __ldcg(residual + (size_t)lane * H + n0);
        r1 = __ldcg(residual + (size_t)lane * H + n0 + 1);
    }
    if (nsplit == 1) {
        for (int i = tid; i < (n_el >> 3); i += LEAN_O_THREADS) {
            float f[8];
            unpack8(__ldcg(reinterpret_cast<const uint4 *>(attn) + i), f);
            reinterpret_cast<float4 *>(xs)[2 * i] = make_float4(f[0], f[1], f[2], f[3]);
            reinterpret_cast<float4 *>(xs)[2 * i + 1] = make_float4(f[4], f[5], f[6], f[7]);
        }
    } else {
        // the first batch of partial outputs is loaded together with (m, l): one round trip
        float po[LEAN_O_BATCH][LEAN_MAX_SPLITS];
        auto load_batch = [&](int e0) {
#pragma unroll
            for (int r = 0; r < LEAN_O_BATCH; r++) {
                const int e = e0 + r * LEAN_O_THREADS + tid;
                const int th = e / ATT_D, d = e % ATT_D;  // th = t * n_heads + h
#pragma unroll
                for (int sp = 0; sp < LEAN_MAX_SPLITS; sp++)
                    po[r][sp] = (e < n_el && sp < nsplit) ? __ldcg(part_o + ((size_t)th * nsplit + sp) * ATT_D + d) : 0.f;
            }
        };
        load_batch(0);
        for (int i = tid; i < n_th * nsplit; i += LEAN_O_THREADS) {
            const float2 v = __ldcg(reinterpret_cast<const float2 *>(part_ml) + i);
            ml_s[2 * i] = v.x;
            ml_s[2 * i + 1] = v.y;
        }
        __syncthreads();
        for (int th = tid; th < n_th; th += LEAN_O_THREADS) {  // attention_combine's weights, same order
            float m = -INFINITY;
            for (int sp = 0; sp < nsplit; sp++) m = fmaxf(m, ml_s[2 * (th * nsplit + sp)]);
            float l = 0.f;
            for (int sp = 0; sp < nsplit; sp++) {
                const float ms = ml_s[2 * (th * nsplit + sp)];
                const float w = (m > -INFINITY && ms != -INFINITY) ? expf(ms - m) : 0.f;
                w_s[th * (LEAN_MAX_SPLITS + 1) + sp] = w;
                l += ml_s[2 * (th * nsplit + sp) + 1] * w;
            }
            w_s[th * (LEAN_MAX_SPLITS + 1) + LEAN_MAX_SPLITS] = l;
        }
        __syncthreads();
        for (int e0 = 0;;) {
#pragma unroll
            for (int r = 0; r < LEAN_O_BATCH; r++) {
                const int e = e0 + r * LEAN_O_THREADS + tid;
                if (e < n_el) {
                    const float *w = w_s + (e / ATT_D) * (LEAN_MAX_SPLITS + 1);
                    float o = 0.f;
#pragma unroll
                    for (int sp = 0; sp < LEAN_MAX_SPLITS; sp++)
                        if (sp < nsplit) o += po[r][sp] * w[sp];
                    const float l = w[LEAN_MAX_SPLITS];
                    xs[e] = bf2f(f2bf(l > 0.f ? o / l : 0.f));
                }
            }
            e0 += LEAN_O_BATCH * LEAN_O_THREADS;
            if (e0 >= n_el) break;
            load_batch(e0);
        }
    }
    __syncthreads();
    if (!out_ok) return;
    float acc0[TM], acc1[TM];
#pragma unroll
    for (int t = 0; t < TM; t++) acc0[t] = acc1[t] = 0.f;
#pragma unroll
    for (int i = 0; i < LEAN_CHUNKS; i++) {
        const int c = lane + 32 * i;
        if (c < chunks) {
            float a[8], b[8];
            unpack8(wa[i], a);
            unpack8(wb[i], b);
#pragma unroll
            for (int t = 0; t < TM; t++) {  // (rows >= T repeat row T - 1: never stored)
                const float4 *xr = reinterpret_cast<const float4 *>(xs + min(t, T - 1) * K + c * 8);
                const float4 p = xr[0], q = xr[1];
                fma8(&acc0[t], a, p, q);
                fma8(&acc1[t], b, p, q);
            }
        }
    }
    float y0, y1;
    rows_to_lanes<TM, false>(acc0, acc1, T, lane, y0, y1);
    if (adds) store_residual_pair(residual, lane, H, n0, r0, y0, r1, y1);
}

// paged_attention_merged (AOTX_LEAN=2): lean_attention, and with nsplit > 1 the last
// split of each (token, KV head) group to finish (a per-group counter, reset by that split) merges the
// group's partials into bf16 out[t, the group's heads] as attention_combine does (attn_fused.cu's
// scheme): omlp_lean (lean_mlp.cu) then reads out directly. counters u32 [T * n_kv], zero (left so).
// lean_attention: attention_unit_pf (the older K/V rows staged before the wait; t_step: the step's
// tokens, or a huge value for no prefetch), partials only when nsplit > 1 (o_lean merges them).
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
lean_attention(const float *__restrict__ q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,
               const int *__restrict__ tok_seq, const int *__restrict__ positions, const int *__restrict__ context_lens,
               const int *__restrict__ block_tables, int bt_stride, int page_size, float scale, int n_kv, int nsplit,
               bf16 *out, float *part_o, float *part_ml, int t_step) {
    attention_unit_pf(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size, scale,
                      n_kv, nsplit, out, part_o, part_ml, blockIdx.x, blockIdx.y, blockIdx.z, t_step);
}

extern "C" __global__ void __launch_bounds__(ATT_THREADS)
paged_attention_merged(const float *__restrict__ q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,
                       const int *__restrict__ tok_seq, const int *__restrict__ positions,
                       const int *__restrict__ context_lens, const int *__restrict__ block_tables, int bt_stride,
                       int page_size, float scale, int n_kv, int nsplit, bf16 *out, float *part_o, float *part_ml,
                       unsigned *counters, int t_step) {
    __shared__ bool last_s;
    const int t = blockIdx.x, kvh = blockIdx.y, tid = threadIdx.x, n_heads = n_kv * ATT_G;
    attention_unit_pf(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size, scale,
                      n_kv, nsplit, out, part_o, part_ml, t, kvh, blockIdx.z, t_step);
    if (nsplit == 1) return;
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        unsigned *cnt = counters + t * n_kv + kvh;
        last_s = atomicAdd(cnt, 1u) == (unsigned)nsplit - 1;
        if (last_s) atomicExch(cnt, 0u);
        __threadfence();
    }
    __syncthreads();
    if (!last_s) return;
    // the merge in two round trips: every partial o of this thread's elements and the group's (m, l)
    // are loaded at once (the splits unrolled), then the weights, then the sums in attention_combine's order
    constexpr int EPT = (ATT_G * ATT_D + ATT_THREADS - 1) / ATT_THREADS;  // elements a thread merges
    __shared__ float ml_s[ATT_G][MERGE_MAX_SPLITS][2];
    __shared__ float w_s[ATT_G][MERGE_MAX_SPLITS + 1];  // exp(m_s - m) per split, then l
    float po[EPT][MERGE_MAX_SPLITS];
#pragma unroll
    for (int r = 0; r < EPT; r++) {
        const int i = tid + r * ATT_THREADS;
        const int h = kvh * ATT_G + i / ATT_D, d = i % ATT_D;
        const size_t base = ((size_t)t * n_heads + h) * nsplit;
#pragma unroll
        for (int sp = 0; sp < MERGE_MAX_SPLITS; sp++)
            po[r][sp] = (i < ATT_G * ATT_D && sp < nsplit) ? __ldcg(part_o + (base + sp) * ATT_D + d) : 0.f;
    }
    if (tid < ATT_G * nsplit) {
        const int g = tid / nsplit, sp = tid % nsplit;
        const float2 v = __ldcg(reinterpret_cast<const float2 *>(part_ml) +
                                ((size_t)t * n_heads + kvh * ATT_G + g) * nsplit + sp);
        ml_s[g][sp][0] = v.x;
        ml_s[g][sp][1] = v.y;
    }
    __syncthreads();
    if (tid < ATT_G) {
        float m = -INFINITY;
        for (int sp = 0; sp < nsplit; sp++) m = fmaxf(m, ml_s[tid][sp][0]);
        float l = 0.f;
        for (int sp = 0; sp < nsplit; sp++) {
            const float ms = ml_s[tid][sp][0];
            const float w = (m > -INFINITY && ms != -INFINITY) ? expf(ms - m) : 0.f;
            w_s[tid][sp] = w;
            l += ml_s[tid][sp][1] * w;
        }
        w_s[tid][MERGE_MAX_SPLITS] = l;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < EPT; r++) {
        const int i = tid + r * ATT_THREADS;
        if (i < ATT_G * ATT_D) {
            const int g = i / ATT_D;
            float o = 0.f;
#pragma unroll
            for (int sp = 0; sp < MERGE_MAX_SPLITS; sp++)
                if (sp < nsplit) o += po[r][sp] * w_s[g][sp];
            const float l = w_s[g][MERGE_MAX_SPLITS];
            out[((size_t)t * n_heads + kvh * ATT_G + g) * ATT_D + i % ATT_D] = f2bf(l > 0.f ? o / l : 0.f);
        }
    }
}

#define LEAN_KERNELS(TM)                                                                                         \
    extern "C" __global__ void __launch_bounds__(LEAN_QKV_WARPS * 32) qkv_lean_t##TM(                          \
        int T, const float *residual, const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ W, int N,   \
        int K, const int *__restrict__ positions, const float2 *__restrict__ rope, const int *__restrict__ slots, \
        float *q_out, bf16 *k_cache, bf16 *v_cache, int head_dim, int q_size, int kv_size) {                     \
        qkv_lean_body<TM>(T, residual, norm_w, eps, W, N, K, positions, rope, slots, q_out, k_cache, v_cache,       \
                         head_dim, q_size, kv_size);                                                             \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(LEAN_O_THREADS) o_lean_t##TM(                                  \
        int T, const bf16 *attn, const float *part_o, const float *part_ml, int nsplit, int n_heads,                    \
        const bf16 *__restrict__ Wo, float *residual, int H) {                                                   \
        o_lean_body<TM>(T, attn, part_o, part_ml, nsplit, n_heads, Wo, residual, H);                                 \
    }

LEAN_KERNELS(1)
LEAN_KERNELS(2)
LEAN_KERNELS(4)
LEAN_KERNELS(8)
