// Paged KV write.  Twin: kernels.ops_attention.kv_write.
// Cache layout: bf16 [num_slots, n_kv_heads * D]; token t goes to slot slots[t]; negative slots are skipped.
#pragma once
#include "common.cuh"

__device__ __forceinline__ void kv_store_pair(bf16 *cache, int slot, int row_width, int col, float a, float b) {
    *reinterpret_cast<__nv_bfloat162 *>(cache + (size_t)slot * row_width + col) = __floats2bfloat162_rn(a, b);
}

// k, v float32 [T, kv_width]; one thread per element pair.
extern "C" __global__ void kv_write(const float *__restrict__ k, const float *__restrict__ v,
                                    const int *__restrict__ slots, bf16 *__restrict__ k_cache,
                                    bf16 *__restrict__ v_cache, int n_tokens, int kv_width) {
    pdl_wait();
    pdl_trigger();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    int pairs = kv_width / 2;
    if (i >= (long)n_tokens * pairs) return;
    int t = (int)(i / pairs), c = (int)(i % pairs) * 2;
    int slot = slots[t];
    if (slot < 0) return;
    size_t o = (size_t)t * kv_width + c;
    kv_store_pair(k_cache, slot, kv_width, c, k[o], k[o + 1]);
    kv_store_pair(v_cache, slot, kv_width, c, v[o], v[o + 1]);
}
