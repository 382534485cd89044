// The fused epilogues of the projections, shared by linear.cu (gemv, mma.sync) and linear_wgmma.cu
// (wgmma): epilogue_pair() receives two adjacent output columns (n, n+1) of one row.
#pragma once
#include "common.cuh"
#include "rope.cu"
#include "kv_write.cu"
#include "swiglu.cu"

#define EPI_STORE 0   // out_f32[m, n] = y
#define EPI_ADD 1     // out_f32[m, n] += y (residual stream)
#define EPI_SWIGLU 2  // columns (2j, 2j+1) = (gate_j, up_j): out_bf16[m, j] = silu(gate) * up
#define EPI_QKV 3     // [q | k | v]: RoPE on q, k; q -> out_f32 [m, q_size]; k, v -> caches at slots[m]

struct Epi {
    float *out_f32;
    bf16 *out_bf16;
    const int *positions;
    const float2 *rope;
    const int *slots;
    bf16 *k_cache;
    bf16 *v_cache;
    int mode;
    int ld;
    int head_dim;
    int q_size;
    int kv_size;
};

__device__ __forceinline__ void epilogue_pair(const Epi &e, int m, int n, float v0, float v1) {
    if (e.mode == EPI_STORE) {
        float *o = e.out_f32 + (size_t)m * e.ld + n;
        o[0] = v0;
        o[1] = v1;
    } else if (e.mode == EPI_ADD) {
        float *o = e.out_f32 + (size_t)m * e.ld + n;
        o[0] += v0;
        o[1] += v1;
    } else if (e.mode == EPI_SWIGLU) {
        e.out_bf16[(size_t)m * e.ld + (n >> 1)] = f2bf(silu_mul(v0, v1));
    } else {
        int qk = e.q_size + e.kv_size;
        if (n < qk) {
            int half = e.head_dim >> 1;
            rope_pair(v0, v1, e.rope[(size_t)e.positions[m] * half + ((n % e.head_dim) >> 1)]);
        }
        if (n < e.q_size) {
            float *o = e.out_f32 + (size_t)m * e.q_size + n;
            o[0] = v0;
            o[1] = v1;
        } else {
            int slot = e.slots[m];
            if (slot >= 0) {
                bf16 *cache = n < qk ? e.k_cache : e.v_cache;
                kv_store_pair(cache, slot, e.kv_size, (n - e.q_size) % e.kv_size, v0, v1);
            }
        }
    }
}
