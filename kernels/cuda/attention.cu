// Paged attention (GQA) for decode and prefill.  Twin: kernels.ops_attention.paged_attention.
// (With AOTX_FLASH_PREFILL=1, steps with a prefill chunk of >= 16 tokens run flash_attention.cu instead:
// kernels.cuda.flash_plan.)
//
// One block per (query token t, KV head, split). Token t belongs to sequence tok_seq[t] and sees keys
// j < L = min(positions[t] + 1, context_lens[seq]) (causal over earlier context and its own chunk), so
// the same kernel serves decode (one token per sequence) and prefill chunks. The block's G = ATT_G query
// heads share each K/V row it loads. Keys go in chunks of ATT_CHUNK: the chunk's K and V rows are
// staged in shared memory with coalesced 16-byte loads (8 threads per row), then scores (one key per
// thread), an online-softmax update, and P.V (4 key groups x 32 lanes, each lane two dims).
//
// Split-K along the sequence: with nsplit > 1 each split covers a contiguous range of chunks and writes
// an unnormalised partial (o, m, l); attention_combine merges them. With nsplit == 1 the block writes
// the normalised output itself. Cache layout: bf16 [num_slots, n_kv * D]; q float32; out bf16.
#include "common.cuh"

#ifndef ATT_CHUNK  // keys a chunk (lean.cu compiles this file with its own)
#define ATT_CHUNK 128
#endif
#define ATT_THREADS 128
static_assert(ATT_G <= ATT_THREADS / 32, "one warp per query head of a KV group");
static_assert(ATT_CHUNK <= ATT_THREADS, "one key per thread of a chunk");
static_assert(ATT_D == 64, "P.V gives each of 32 lanes two dims");

#define ATT_ROW (ATT_D + 8)  // padded shared row (144 bytes): conflict-free 16-byte reads down a column

#ifndef INT_MAX
#define INT_MAX 2147483647
#endif

// One (query token t, KV head kvh, split) unit: the body of paged_attention (PF = false: call after
// pdl_wait; also run by attn_o_fused, attn_fused.cu) and of lean.cu's kernels (PF = true: call BEFORE
// pdl_wait: it waits itself, after staging the K/V rows of its first chunk that no kernel of this step
// writes: keys j < positions[t] - t_step + 1 (a step of t_step tokens writes a sequence's keys at its own
// tokens' positions, all within t_step - 1 below t's). The sequence arrays and block tables are the
// step's host-staged constants; q and the newer rows come after the wait. A huge t_step turns the
// prefetch off (nothing but the slots is read early). PF = false ignores t_step.)
// Ends with the block's writes issued.
template <bool PF>
__device__ __forceinline__ void attention_unit_body(const float *q, const bf16 *__restrict__ k_cache,
                                                    const bf16 *__restrict__ v_cache, const int *__restrict__ tok_seq,
                                                    const int *__restrict__ positions,
                                                    const int *__restrict__ context_lens,
                                                    const int *__restrict__ block_tables, int bt_stride,
                                                    int page_size, float scale, int n_kv, int nsplit, bf16 *out,
                                                    float *part_o, float *part_ml, const int t, const int kvh,
                                                    const int split, const int t_step) {
    __shared__ __align__(16) bf16 ks[ATT_CHUNK * ATT_ROW];
    __shared__ __align__(16) bf16 vs[ATT_CHUNK * ATT_ROW];
    __shared__ __align__(16) float qs[ATT_G][ATT_D];
    __shared__ float ps[ATT_G][ATT_CHUNK];
    __shared__ int slot_s[ATT_CHUNK];
    __shared__ float m_s[ATT_G], l_s[ATT_G], corr_s[ATT_G];
    __shared__ float red[4][ATT_G][ATT_D];

    const int tid = threadIdx.x, lane = tid & 31, grp = tid >> 5;
    const int n_heads = n_kv * ATT_G, kv_width = n_kv * ATT_D;
    const int seq = tok_seq[t];
    const int L = min(positions[t] + 1, context_lens[seq]);
    const int nchunks = (L + ATT_CHUNK - 1) / ATT_CHUNK;
    const int per = (nchunks + nsplit - 1) / nsplit;
    const int c_begin = split * per, c_end = min(nchunks, c_begin + per);
    const int *bt = block_tables + (size_t)seq * bt_stride;
    constexpr int PIECES = ATT_D / 8;                    // 16-byte pieces per K/V row
    constexpr int ROWS_PER_PASS = ATT_THREADS / PIECES;  // rows staged per pass
    // (PF) the chunk's K and V rows r with lo <= j0 + r < hi into shared memory:
    // 8 consecutive threads per 128-byte row, every load issued before the first store
    auto stage_rows = [&](int j0, int n, int lo, int hi) {
        const int piece = tid % PIECES;
        uint4 kr[ATT_CHUNK / ROWS_PER_PASS], vr[ATT_CHUNK / ROWS_PER_PASS];
#pragma unroll
        for (int pass = 0; pass < ATT_CHUNK / ROWS_PER_PASS; pass++) {
            int row = pass * ROWS_PER_PASS + tid / PIECES;
            if (row < n && j0 + row >= lo && j0 + row < hi) {
                size_t off = (size_t)slot_s[row] * kv_width + kvh * ATT_D + piece * 8;
                kr[pass] = *reinterpret_cast<const uint4 *>(k_cache + off);
                vr[pass] = *reinterpret_cast<const uint4 *>(v_cache + off);
            }
        }
#pragma unroll
        for (int pass = 0; pass < ATT_CHUNK / ROWS_PER_PASS; pass++) {
            int row = pass * ROWS_PER_PASS + tid / PIECES;
            if (row < n && j0 + row >= lo && j0 + row < hi) {
                *reinterpret_cast<uint4 *>(ks + row * ATT_ROW + piece * 8) = kr[pass];
                *reinterpret_cast<uint4 *>(vs + row * ATT_ROW + piece * 8) = vr[pass];
            }
        }
    };
    const int j_new = PF ? positions[t] - t_step + 1 : 0;
    if constexpr (PF) {
        if (c_begin < c_end) {
            const int j0 = c_begin * ATT_CHUNK, n = min(ATT_CHUNK, L - j0);
            if (tid < n) slot_s[tid] = bt[(j0 + tid) / page_size] * page_size + (j0 + tid) % page_size;
            __syncthreads();
            stage_rows(j0, n, 0, j_new);
        }
        pdl_wait();
        pdl_trigger();
    }

    for (int i = tid; i < ATT_G * ATT_D; i += ATT_THREADS)
        qs[i / ATT_D][i % ATT_D] = q[(size_t)t * n_heads * ATT_D + (size_t)kvh * ATT_G * ATT_D + i];
    if (tid < ATT_G) {
        m_s[tid] = -INFINITY;
        l_s[tid] = 0.f;
    }
    float acc[ATT_G][2];
#pragma unroll
    for (int g = 0; g < ATT_G; g++) acc[g][0] = acc[g][1] = 0.f;

    for (int ch = c_begin; ch < c_end; ch++) {
        const int j0 = ch * ATT_CHUNK, n = min(ATT_CHUNK, L - j0);
        if (PF && ch == c_begin) {  // slots and the older rows were staged before the wait
            stage_rows(j0, n, j_new, INT_MAX);
        } else {
            if (tid < n) {
                int j = j0 + tid;
                slot_s[tid] = bt[j / page_size] * page_size + j % page_size;
            }
            __syncthreads();
            if constexpr (PF) {
                stage_rows(j0, n, 0, INT_MAX);
            } else {  // the same staging written out: through the lambda NVVM emits other PTX for this path
                const int piece = tid % PIECES;
                uint4 kr[ATT_CHUNK / ROWS_PER_PASS], vr[ATT_CHUNK / ROWS_PER_PASS];
#pragma unroll
                for (int pass = 0; pass < ATT_CHUNK / ROWS_PER_PASS; pass++) {
                    int row = pass * ROWS_PER_PASS + tid / PIECES;
                    if (row < n) {
                        size_t off = (size_t)slot_s[row] * kv_width + kvh * ATT_D + piece * 8;
                        kr[pass] = *reinterpret_cast<const uint4 *>(k_cache + off);
                        vr[pass] = *reinterpret_cast<const uint4 *>(v_cache + off);
                    }
                }
#pragma unroll
                for (int pass = 0; pass < ATT_CHUNK / ROWS_PER_PASS; pass++) {
                    int row = pass * ROWS_PER_PASS + tid / PIECES;
                    if (row < n) {
                        *reinterpret_cast<uint4 *>(ks + row * ATT_ROW + piece * 8) = kr[pass];
                        *reinterpret_cast<uint4 *>(vs + row * ATT_ROW + piece * 8) = vr[pass];
                    }
                }
            }
        }
        __syncthreads();
        if (tid < n) {  // one key per thread
            float dot[ATT_G];
#pragma unroll
            for (int g = 0; g < ATT_G; g++) dot[g] = 0.f;
#pragma unroll
            for (int c = 0; c < PIECES; c++) {
                float kf[8];
                unpack8(*reinterpret_cast<const uint4 *>(ks + tid * ATT_ROW + c * 8), kf);
#pragma unroll
                for (int g = 0; g < ATT_G; g++)
#pragma unroll
                    for (int i = 0; i < 8; i++) dot[g] += qs[g][c * 8 + i] * kf[i];
            }
#pragma unroll
            for (int g = 0; g < ATT_G; g++) ps[g][tid] = dot[g] * scale;
        } else if (ATT_CHUNK == ATT_THREADS || tid < ATT_CHUNK) {  // (lean.cu: chunks shorter than the block)
#pragma unroll
            for (int g = 0; g < ATT_G; g++) ps[g][tid] = -INFINITY;
        }
        __syncthreads();
        if (grp < ATT_G) {  // warp g: chunk max, probabilities, running (m, l)
            int g = grp;
            float mx = -INFINITY;
            for (int i = lane; i < ATT_CHUNK; i += 32) mx = fmaxf(mx, ps[g][i]);
            mx = warp_max(mx);
            float m_new = fmaxf(m_s[g], mx);
            float sum = 0.f;
            for (int i = lane; i < ATT_CHUNK; i += 32) {
                float p = i < n ? expf(ps[g][i] - m_new) : 0.f;
                ps[g][i] = p;
                sum += p;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                float corr = expf(m_s[g] - m_new);
                corr_s[g] = corr;
                l_s[g] = l_s[g] * corr + sum;
                m_s[g] = m_new;
            }
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < ATT_G; g++) {
            acc[g][0] *= corr_s[g];
            acc[g][1] *= corr_s[g];
        }
        for (int i = grp; i < n; i += 4) {  // P.V from shared memory: lane owns dims 2*lane, 2*lane+1
            float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(vs + i * ATT_ROW + 2 * lane));
#pragma unroll
            for (int g = 0; g < ATT_G; g++) {
                acc[g][0] += ps[g][i] * v.x;
                acc[g][1] += ps[g][i] * v.y;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int g = 0; g < ATT_G; g++) {
        red[grp][g][2 * lane] = acc[g][0];
        red[grp][g][2 * lane + 1] = acc[g][1];
    }
    __syncthreads();
    for (int i = tid; i < ATT_G * ATT_D; i += ATT_THREADS) {
        int g = i / ATT_D, d = i % ATT_D;
        float o = red[0][g][d] + red[1][g][d] + red[2][g][d] + red[3][g][d];
        int h = kvh * ATT_G + g;
        if (nsplit == 1) {
            out[(size_t)t * n_heads * ATT_D + h * ATT_D + d] = f2bf(l_s[g] > 0.f ? o / l_s[g] : 0.f);
        } else {
            size_t p = ((size_t)t * n_heads + h) * nsplit + split;
            part_o[p * ATT_D + d] = o;
            if (d == 0) {
                part_ml[2 * p] = m_s[g];
                part_ml[2 * p + 1] = l_s[g];
            }
        }
    }
}

__device__ __forceinline__ void attention_unit(const float *q, const bf16 *__restrict__ k_cache,
                                               const bf16 *__restrict__ v_cache, const int *__restrict__ tok_seq,
                                               const int *__restrict__ positions, const int *__restrict__ context_lens,
                                               const int *__restrict__ block_tables, int bt_stride, int page_size,
                                               float scale, int n_kv, int nsplit, bf16 *out, float *part_o,
                                               float *part_ml, const int t, const int kvh, const int split) {
    attention_unit_body<false>(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                               page_size, scale, n_kv, nsplit, out, part_o, part_ml, t, kvh, split, 0);
}

__device__ __forceinline__ void attention_unit_pf(const float *q, const bf16 *__restrict__ k_cache,
                                                  const bf16 *__restrict__ v_cache, const int *__restrict__ tok_seq,
                                                  const int *__restrict__ positions,
                                                  const int *__restrict__ context_lens,
                                                  const int *__restrict__ block_tables, int bt_stride, int page_size,
                                                  float scale, int n_kv, int nsplit, bf16 *out, float *part_o,
                                                  float *part_ml, const int t, const int kvh, const int split,
                                                  const int t_step) {
    attention_unit_body<true>(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride,
                              page_size, scale, n_kv, nsplit, out, part_o, part_ml, t, kvh, split, t_step);
}

#ifndef ATTENTION_UNIT_ONLY  // (lean.cu takes attention_unit's pieces, not these kernels)
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
paged_attention(const float *__restrict__ q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,
                const int *__restrict__ tok_seq, const int *__restrict__ positions,
                const int *__restrict__ context_lens, const int *__restrict__ block_tables, int bt_stride,
                int page_size, float scale, int n_kv, int nsplit, bf16 *__restrict__ out,
                float *__restrict__ part_o, float *__restrict__ part_ml) {
    pdl_wait();
    pdl_trigger();
    attention_unit(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, bt_stride, page_size, scale,
                   n_kv, nsplit, out, part_o, part_ml, blockIdx.x, blockIdx.y, blockIdx.z);
}

// Merge nsplit partials per (token, head): grid (T, n_heads), ATT_D threads.
extern "C" __global__ void attention_combine(const float *__restrict__ part_o, const float *__restrict__ part_ml,
                                             int n_heads, int nsplit, bf16 *__restrict__ out) {
    pdl_wait();
    pdl_trigger();
    int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
    size_t base = ((size_t)t * n_heads + h) * nsplit;
    float m = -INFINITY;
    for (int s = 0; s < nsplit; s++) m = fmaxf(m, part_ml[2 * (base + s)]);
    float l = 0.f, o = 0.f;
    if (m > -INFINITY) {
        for (int s = 0; s < nsplit; s++) {
            float ms = part_ml[2 * (base + s)];
            if (ms == -INFINITY) continue;
            float w = expf(ms - m);
            l += part_ml[2 * (base + s) + 1] * w;
            o += part_o[(base + s) * ATT_D + d] * w;
        }
    }
    out[((size_t)t * n_heads + h) * ATT_D + d] = f2bf(l > 0.f ? o / l : 0.f);
}
#endif  // ATTENTION_UNIT_ONLY
