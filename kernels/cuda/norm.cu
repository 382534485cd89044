// Fused residual add + RMSNorm.  Twin: kernels.ops_norm.add_rmsnorm / rmsnorm.
//   r = residual[src] (+= x[src] when x is given, written back);  out[row] = bf16(r / sqrt(mean(r^2) + eps) * w)
// One block per output row; src = rows ? rows[row] : row (a gather, used for the LM-head rows).
#include "common.cuh"

extern "C" __global__ void add_rmsnorm(const float *__restrict__ x, float *__restrict__ residual,
                                       const float *__restrict__ weight, bf16 *__restrict__ out,
                                       const int *__restrict__ rows, int hidden, float eps) {
    pdl_wait();
    pdl_trigger();
    __shared__ float scratch[32];
    int row = blockIdx.x;
    int src = rows ? rows[row] : row;
    float *r = residual + (size_t)src * hidden;
    float ss = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = r[i];
        if (x) {
            v += x[(size_t)src * hidden + i];
            r[i] = v;
        }
        ss += v * v;
    }
    float rstd = 1.f / sqrtf(block_sum(ss, scratch) / (float)hidden + eps);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        out[(size_t)row * hidden + i] = f2bf(r[i] * rstd * weight[i]);
}

// The same, one warp per row (NORM_WARPS rows a block): the row read once into registers (at most
// NORM_MAX_PAIRS float2 a lane: hidden <= 64 * NORM_MAX_PAIRS, even), 8-byte loads, bf16x2 stores, a warp
// reduction instead of the block's two barriers. Same arithmetic per element; only the order of the sum of
// squares differs. launchers.Kernels.add_rmsnorm takes it for every shape it fits (the model: hidden 576).
#define NORM_MAX_PAIRS 16
extern "C" __global__ void add_rmsnorm_warp(const float *__restrict__ x, float *__restrict__ residual,
                                            const float *__restrict__ weight, bf16 *__restrict__ out,
                                            const int *__restrict__ rows, int n_rows, int hidden, float eps) {
    pdl_wait();
    pdl_trigger();
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= n_rows) return;
    const int src = rows ? rows[row] : row, pairs = hidden >> 1;
    float2 *r = reinterpret_cast<float2 *>(residual + (size_t)src * hidden);
    const float2 *xr = x ? reinterpret_cast<const float2 *>(x + (size_t)src * hidden) : nullptr;
    float2 v[NORM_MAX_PAIRS];   // every load issued before the first use (lanes past the row: zeros)
#pragma unroll
    for (int k = 0; k < NORM_MAX_PAIRS; k++) v[k] = lane + 32 * k < pairs ? r[lane + 32 * k] : make_float2(0.f, 0.f);
    if (xr) {
#pragma unroll
        for (int k = 0; k < NORM_MAX_PAIRS; k++) {
            const int i = lane + 32 * k;
            if (i < pairs) {
                const float2 a = xr[i];
                v[k].x += a.x;
                v[k].y += a.y;
                r[i] = v[k];
            }
        }
    }
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < NORM_MAX_PAIRS; k++) ss += v[k].x * v[k].x + v[k].y * v[k].y;
    const float rstd = 1.f / sqrtf(warp_sum(ss) / (float)hidden + eps);
    const float2 *w = reinterpret_cast<const float2 *>(weight);
    __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(out + (size_t)row * hidden);
#pragma unroll
    for (int k = 0; k < NORM_MAX_PAIRS; k++) {
        const int i = lane + 32 * k;
        if (i < pairs) {
            const float2 wk = w[i];
            o[i] = __halves2bfloat162(f2bf(v[k].x * rstd * wk.x), f2bf(v[k].y * rstd * wk.y));
        }
    }
}
