// Embedding gather: out[t, :] = float(table[ids[t], :]).  Twin: kernels.ops_embed.embedding.
#include "common.cuh"

extern "C" __global__ void embedding_gather(const int *__restrict__ ids, const bf16 *__restrict__ table,
                                            float *__restrict__ out, int hidden) {
    pdl_wait();
    pdl_trigger();
    int t = blockIdx.x;
    const bf16 *row = table + (size_t)ids[t] * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[(size_t)t * hidden + i] = bf2f(row[i]);
}
