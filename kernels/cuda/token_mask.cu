// Token masks for constrained rows (structured outputs): the numpy twin is kernels/token_mask.py
// (masked_rows; apply_token_mask is the same values in place).
//
// out[r, v] = logits[rows[r], v] if bit_row[r] < 0 (an unconstrained row: copied as is) or bit
// (v & 31) of bits[bit_row[r], v >> 5] is set; else -inf. The sampler then reads `out`, so the
// step's logits stay raw (logprobs read them). Launched only for a step with a constrained row:
// grid (ceil(vocab / 256), n_rows), 256 threads; each uint32 word of the mask is read by 32
// neighbouring threads of one warp (one broadcast load).
#include "common.cuh"

extern "C" __global__ void token_mask_rows(const float *__restrict__ logits, const int *__restrict__ rows,
                                           const u32 *__restrict__ bits, const int *__restrict__ bit_row,
                                           float *__restrict__ out, int vocab, int words) {
    pdl_wait();
    int r = blockIdx.y;
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vocab) return;
    float l = logits[(size_t)rows[r] * vocab + v];
    int b = bit_row[r];
    if (b >= 0) {
        u32 w = (v >> 5) < words ? bits[(size_t)b * words + (v >> 5)] : 0u;
        if (!((w >> (v & 31)) & 1u)) l = -INFINITY;
    }
    out[(size_t)r * vocab + v] = l;
}
