// attn_o_fused: paged attention + split combine + O projection + residual add in ONE launch, for
// T <= 8 query tokens (decode at batch <= 8). Twin: kernels.cuda.fused_twins.attn_o_fused_twin.
//
// Phase 1: blocks take the attention units (t, kvh, split) u = blockIdx.x, + gridDim.x, ... (the body
// of paged_attention, attention.cu). With nsplit > 1 each unit writes its partial (o, m, l); the last
// unit of a (t, kvh) group to finish (a per-group counter, reset by that unit) merges the group's
// partials into bf16 attn[t, kvh heads] as attention_combine does. A grid barrier (fused.cu's scheme),
// then phase 2: warp w computes the O-projection column pair w of every row from attn (read from L2)
// and adds it into the float32 residual. The O weights and the residual entries are loaded before the
// barrier. The grid must be resident at once (the host checks the occupancy).
#include "attention.cu"

#define AO_THREADS ATT_THREADS
#define AO_WARPS (AO_THREADS / 32)
#define AO_T 8
#define AO_CHUNKS 3  // (K / 8) / 32, K = n_heads * ATT_D <= 768

__device__ __forceinline__ void ao_grid_barrier(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned nb = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u, old, cur;
        asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(bar), "r"(nb) : "memory");
        do {
            asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(cur) : "l"(bar) : "memory");
        } while (((old ^ cur) & 0x80000000u) == 0);
    }
    __syncthreads();
}

// q float32 [T, n_heads*D]; attn bf16 [T, n_heads*D] (scratch); Wo bf16 [H, n_heads*D]; residual float32
// [T, H]; counters u32 [T * n_kv] and *bar zero-initialised (left so). Grid >= H / (2 * AO_WARPS).
extern "C" __global__ void __launch_bounds__(AO_THREADS)
attn_o_fused(const float *q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,
             const int *__restrict__ tok_seq, const int *__restrict__ positions,
             const int *__restrict__ context_lens, const int *__restrict__ block_tables, int bt_stride,
             int page_size, float scale, int n_kv, int nsplit, bf16 *attn, float *part_o, float *part_ml,
             const bf16 *__restrict__ Wo, float *residual, int H, int T, unsigned *counters, unsigned *bar) {
    __shared__ bool last_s;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n_heads = n_kv * ATT_G, K = n_heads * ATT_D, chunks = K >> 3;
    const int n0 = 2 * (blockIdx.x * AO_WARPS + warp);
    const bool out_ok = n0 < H;
    uint4 wa[AO_CHUNKS], wb[AO_CHUNKS];
    load_pair_rows<AO_CHUNKS>(Wo, n0, K, out_ok, wa, wb);
    pdl_wait();
    const bool adds = out_ok && lane < T;
    float r0 = 0.f, r1 = 0.f;
    if (adds) {
        r0 = __ldcg(residual + (size_t)lane * H + n0);
        r1 = __ldcg(residual + (size_t)lane * H + n0 + 1);
    }
    const int units = T * n_kv * nsplit;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int t = u / (n_kv * nsplit), kvh = (u / nsplit) % n_kv, split = u % nsplit;
        attention_unit(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size,
                       scale, n_kv, nsplit, attn, part_o, part_ml, t, kvh, split);
        if (nsplit > 1) {  // the group's last unit merges its partials (attention_combine, for 3 heads)
            __syncthreads();
            if (tid == 0) {
                __threadfence();
                unsigned *cnt = counters + t * n_kv + kvh;
                last_s = atomicAdd(cnt, 1u) == (unsigned)nsplit - 1;
                if (last_s) atomicExch(cnt, 0u);
                __threadfence();
            }
            __syncthreads();
            if (last_s) {
                for (int i = tid; i < ATT_G * ATT_D; i += AO_THREADS) {
                    const int h = kvh * ATT_G + i / ATT_D, d = i % ATT_D;
                    const size_t base = ((size_t)t * n_heads + h) * nsplit;
                    float m = -INFINITY;
                    for (int sp = 0; sp < nsplit; sp++) m = fmaxf(m, __ldcg(part_ml + 2 * (base + sp)));
                    float l = 0.f, o = 0.f;
                    if (m > -INFINITY) {
                        for (int sp = 0; sp < nsplit; sp++) {
                            float ms = __ldcg(part_ml + 2 * (base + sp));
                            if (ms == -INFINITY) continue;
                            float w = expf(ms - m);
                            l += __ldcg(part_ml + 2 * (base + sp) + 1) * w;
                            o += __ldcg(part_o + (base + sp) * ATT_D + d) * w;
                        }
                    }
                    attn[((size_t)t * n_heads + h) * ATT_D + d] = f2bf(l > 0.f ? o / l : 0.f);
                }
            }
        }
        __syncthreads();  // the next unit reuses attention_unit's shared memory
    }
    ao_grid_barrier(bar);
    pdl_trigger();
    if (!out_ok) return;
    float acc0[AO_T], acc1[AO_T];
#pragma unroll
    for (int t = 0; t < AO_T; t++) acc0[t] = acc1[t] = 0.f;
#pragma unroll
    for (int i = 0; i < AO_CHUNKS; i++) {
        int c = lane + 32 * i;
        if (c < chunks) {
            float a[8], b[8];
            unpack8(wa[i], a);
            unpack8(wb[i], b);
#pragma unroll
            for (int t = 0; t < AO_T; t++) {
                if (t < T) {
                    float x[8];
                    unpack8(__ldcg(reinterpret_cast<const uint4 *>(attn + (size_t)t * K) + c), x);
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        acc0[t] += a[j] * x[j];
                        acc1[t] += b[j] * x[j];
                    }
                }
            }
        }
    }
    float y0, y1;  // lane t keeps row t's sums
    rows_to_lanes<AO_T, true>(acc0, acc1, T, lane, y0, y1);
    if (adds) store_residual_pair(residual, lane, H, n0, r0, y0, r1, y1);
}
