// Shared helpers for every kernel family: bf16 conversion, warp/block reductions.
#pragma once
#include <cuda_bf16.h>

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// Attention's shape (attention.cu, attn_fused.cu, flash_attention.cu): query heads per KV head and the head
// dim; launchers pass the model's as defines, these are SmolLM2-135M's.
#ifndef ATT_G
#define ATT_G 3
#endif
#ifndef ATT_D
#define ATT_D 64
#endif

typedef unsigned long long u64;
typedef unsigned int u32;
typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float bf2f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 f2bf(float v) { return __float2bfloat16_rn(v); }

// 8 packed bf16 (one 16-byte load) to float.
__device__ __forceinline__ void unpack8(const uint4 &p, float *out) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&p);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
    }
}

// Programmatic dependent launch (sm_90): a kernel launched with programmatic stream serialization
// may start while its predecessor finishes. pdl_wait() returns once the predecessor grid has
// completed and its writes are visible: every kernel calls it before touching activations (only
// read-only weights may be read before it). pdl_trigger() lets the successor launch early.
// Both are no-ops when the kernel was launched without the attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Rows row, row + 1 of W bf16 [*, K] as N 16-byte pieces a lane (piece lane + 32 i), where ok; the pieces not
// loaded stay unset (the callers never read them). (o_lean_body's zeroing copy stays its own: through this helper
// its PTX registers were numbered otherwise.)
template <int N>
__device__ __forceinline__ void load_pair_rows(const bf16 *W, int row, int K, bool ok, uint4 *ra, uint4 *rb) {
    const int lane = threadIdx.x & 31, chunks = K >> 3;
    const uint4 *w0 = reinterpret_cast<const uint4 *>(W + (size_t)(ok ? row : 0) * K);
    const uint4 *w1 = reinterpret_cast<const uint4 *>(W + (size_t)(ok ? row + 1 : 0) * K);
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int c = lane + 32 * i;
        if (ok && c < chunks) {
            ra[i] = w0[c];
            rb[i] = w1[c];
        }
    }
}

// residual[lane, n0 .. n0 + 1] = (r0 + y0, r1 + y1). The values come by reference: by value NVRTC 13 numbers
// the callers' PTX registers otherwise (the same code, but the kernels' PTX is kept byte-identical).
__device__ __forceinline__ void store_residual_pair(float *residual, int lane, int H, int n0, const float &r0,
                                                    const float &y0, const float &r1, const float &y1) {
    float *o = residual + (size_t)lane * H + n0;
    o[0] = r0 + y0;
    o[1] = r1 + y1;
}

// Row t's warp sums of acc0[t], acc1[t] land in lane t's (y0, y1) (0 elsewhere); with GUARD only rows t < T
// are summed (without, the caller's rows >= T are summed and never stored).
template <int TN, bool GUARD>
__device__ __forceinline__ void rows_to_lanes(const float (&acc0)[TN], const float (&acc1)[TN], int T, int lane,
                                              float &y0, float &y1) {
    y0 = y1 = 0.f;
#pragma unroll
    for (int t = 0; t < TN; t++) {
        if (!GUARD || t < T) {
            const float s0 = warp_sum(acc0[t]), s1 = warp_sum(acc1[t]);
            if (lane == t) {
                y0 = s0;
                y1 = s1;
            }
        }
    }
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float *scratch /* >= 32 floats */) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < nw ? scratch[lane] : 0.f;
    return warp_sum(t);
}
