// The attention unit of lean.cu (AOTX_LEAN): attention.cu's attention_unit (include that first: its
// defines and shapes) with the K/V staging of its first chunk split around griddepcontrol.wait.
#pragma once
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif

// Called BEFORE pdl_wait: it waits itself, after staging the K/V rows of its first chunk that no kernel
// of this step writes: keys j < positions[t] - t_step + 1 (a step of t_step tokens writes a sequence's
// keys at its own tokens' positions, all within t_step - 1 below t's). The sequence arrays and block
// tables are the step's host-staged constants; q and the newer rows come after the wait. A huge t_step
// turns the prefetch off (nothing but the slots is read early).
__device__ __forceinline__ void attention_unit_pf(const float *q, const bf16 *__restrict__ k_cache,
                                                 const bf16 *__restrict__ v_cache, const int *__restrict__ tok_seq,
                                                 const int *__restrict__ positions,
                                                 const int *__restrict__ context_lens,
                                                 const int *__restrict__ block_tables, int bt_stride, int page_size,
                                                 float scale, int n_kv, int nsplit, bf16 *out, float *part_o,
                                                 float *part_ml, const int t, const int kvh, const int split,
                                                 const int t_step) {
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
    // the chunk's K and V rows r with lo <= j0 + r < hi into shared memory: 8 consecutive threads per
    // 128-byte row, every load issued before the first store
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
    const int j_new = positions[t] - t_step + 1;
    {
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
        if (ch == c_begin) {  // slots and the older rows were staged before the wait
            stage_rows(j0, n, j_new, INT_MAX);
        } else {
            if (tid < n) {
                int j = j0 + tid;
                slot_s[tid] = bt[j / page_size] * page_size + j % page_size;
            }
            __syncthreads();
            stage_rows(j0, n, 0, INT_MAX);
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
