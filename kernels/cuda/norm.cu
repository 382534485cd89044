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
