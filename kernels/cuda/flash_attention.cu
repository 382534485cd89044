// Causal flash attention over the paged KV cache (GQA) on tensor cores, for prefill chunks.
// Twin: kernels.ops_attention.paged_attention (the semantics of paged_attention in attention.cu:
// token t of sequence s = tok_seq[t] sees keys j < min(positions[t] + 1, context_lens[s])).
//
// One block per (KV head, query tile). A tile is up to BQ = 16 * MW consecutive query tokens of one
// sequence, listed by the host (tiles[2i] = first token, tiles[2i+1] = rows; heaviest first). A warp
// owns 16 of the tile's tokens for one of the KV head's ATT_G query heads, so each K/V tile is loaded
// once (cp.async, double-buffered) for all of the group's query heads. With KS > 1 the block has KS
// key groups of such warps: group k takes key tiles k, k + KS, ... (a long tile's walk is KS times
// shorter) and the groups' (o, m, l) merge through shared memory at the end. Per K/V tile of FA_BK keys:
// S = Q K^T and O += P V with mma.sync m16n8k16 (bf16 in, float32 accumulate; K fragments by
// ldmatrix, V fragments by ldmatrix.trans, P re-used from the S accumulators as A fragments), an
// online softmax in float32 (base 2: q is pre-scaled by scale * log2 e), and key tiles past every
// row's limit are never visited (causal skip). q is float32 in, rounded to bf16 for the tensor cores;
// P is rounded to bf16 for P V (its row sums use the rounded values). out bf16.
#include "mma.cuh"

#define FA_BK 64             // keys per K/V tile
#define FA_ROW (ATT_D + 8)   // padded shared row (144 bytes): conflict-free ldmatrix
static_assert(ATT_D == 64, "fragments are laid out for head dim 64");

__device__ __forceinline__ float fast_exp2(float x) {  // ex2.approx(-inf) = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

template <int MW, int KS, int ST>
__device__ __forceinline__ void flash_tile(const float *__restrict__ q, const bf16 *__restrict__ k_cache,
                                           const bf16 *__restrict__ v_cache, const int *__restrict__ tiles,
                                           const int *__restrict__ tok_seq, const int *__restrict__ positions,
                                           const int *__restrict__ context_lens, const int *__restrict__ block_tables,
                                           int bt_stride, int page_size, float scale, int n_kv, bf16 *__restrict__ out) {
    constexpr int BQ = 16 * MW, GW = ATT_G * MW, NTHREADS = 32 * GW * KS;  // GW: warps of one key group
    constexpr int TILE = FA_BK * FA_ROW;
    static_assert(ST >= 2, "one stage computed while the next lands");
    extern __shared__ __align__(16) bf16 fa_smem[];  // [KS][ST][K, V][TILE] (launchers.FLASH_SMEM_PER_STAGE each)
    __shared__ int lim_s[BQ];
    __shared__ int maxlim_s;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int grp = warp / GW, wl = warp % GW;  // key group; warp within it
    const int kvh = blockIdx.x;
    const int t0 = tiles[2 * blockIdx.y], nrows = tiles[2 * blockIdx.y + 1];
    const int seq = tok_seq[t0];
    const int n_heads = n_kv * ATT_G, kv_width = n_kv * ATT_D;
    const int h = kvh * ATT_G + wl / MW;  // this warp's query head
    const int ra = (wl % MW) * 16 + g, rb = ra + 8;  // its two rows (tile-relative tokens)
    const int *bt = block_tables + (size_t)seq * bt_stride;

    if (tid == 0) maxlim_s = 0;
    __syncthreads();
    if (tid < BQ) {
        int lim = 0;
        if (tid < nrows) {
            lim = min(positions[t0 + tid] + 1, context_lens[seq]);
            atomicMax(&maxlim_s, lim);
        }
        lim_s[tid] = lim;
    }
    __syncthreads();
    const int maxlim = maxlim_s, lim_a = lim_s[ra], lim_b = lim_s[rb];
    int wmin = min(lim_a, lim_b);  // the warp's smallest limit: key tiles below it need no mask
#pragma unroll
    for (int o = 16; o; o >>= 1) wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));

    const int nkt = (maxlim + FA_BK - 1) / FA_BK, rounds = (nkt + KS - 1) / KS;
    // round r: key group k holds key tile r * KS + k (rows j0..j0+63 of this KV head; j >= maxlim zero-filled).
    // A thread's ITER chunks: every slot address first (the block-table reads in flight together; a shift for
    // a power-of-two page size), then the copies.
    constexpr int CHUNKS = KS * FA_BK * 8, ITER = (CHUNKS + NTHREADS - 1) / NTHREADS;
    const int ps_shift = (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
    auto load = [&](int stage, int rd) {   // (past the last round: an empty group, so the waits stay uniform)
        if (rd >= rounds) {
            asm volatile("cp.async.commit_group;\n" ::);
            return;
        }
        int slot[ITER];   // the key row's cache slot; -1: past the keys (zero-filled)
#pragma unroll
        for (int u = 0; u < ITER; u++) {
            const int i = tid + u * NTHREADS;
            const int kg = i / (FA_BK * 8), row = (i >> 3) % FA_BK, piece = i & 7;
            const int j = (rd * KS + kg) * FA_BK + row;
            const int page = ps_shift >= 0 ? j >> ps_shift : j / page_size;
            const int in_page = ps_shift >= 0 ? j & (page_size - 1) : j % page_size;
            slot[u] = (CHUNKS % NTHREADS == 0 || i < CHUNKS) && j < maxlim ? bt[page] * page_size + in_page : -1;
        }
#pragma unroll
        for (int u = 0; u < ITER; u++) {
            const int i = tid + u * NTHREADS;
            if (CHUNKS % NTHREADS == 0 || i < CHUNKS) {
                const int kg = i / (FA_BK * 8), row = (i >> 3) % FA_BK, piece = i & 7;
                const size_t off = slot[u] >= 0 ? (size_t)slot[u] * kv_width + kvh * ATT_D + piece * 8 : 0;
                bf16 *kdst = fa_smem + ((kg * ST + stage) * 2) * TILE + row * FA_ROW + piece * 8;
                cp_async16(kdst, k_cache + off, slot[u] >= 0 ? 16 : 0);
                cp_async16(kdst + TILE, v_cache + off, slot[u] >= 0 ? 16 : 0);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int r = 0; r < ST - 1; r++) load(r, r);   // rounds 0 .. ST - 2 (a group each, empty past the last)

    // Q as A fragments (rows ra / rb, dims 16 kk + 2c (+1), + 8), scaled and rounded to bf16
    const float qscale = scale * 1.4426950408889634f;
    u32 qf[4][4];
    {
        const float *qa = q + ((size_t)(t0 + ra) * n_heads + h) * ATT_D;
        const float *qb = q + ((size_t)(t0 + rb) * n_heads + h) * ATT_D;
        const bool va = ra < nrows, vb = rb < nrows;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const int d = kk * 16 + 2 * c;
            float2 a0 = va ? *reinterpret_cast<const float2 *>(qa + d) : make_float2(0.f, 0.f);
            float2 b0 = vb ? *reinterpret_cast<const float2 *>(qb + d) : make_float2(0.f, 0.f);
            float2 a1 = va ? *reinterpret_cast<const float2 *>(qa + d + 8) : make_float2(0.f, 0.f);
            float2 b1 = vb ? *reinterpret_cast<const float2 *>(qb + d + 8) : make_float2(0.f, 0.f);
            qf[kk][0] = pack_bf16(a0.x * qscale, a0.y * qscale);
            qf[kk][1] = pack_bf16(b0.x * qscale, b0.y * qscale);
            qf[kk][2] = pack_bf16(a1.x * qscale, a1.y * qscale);
            qf[kk][3] = pack_bf16(b1.x * qscale, b1.y * qscale);
        }
    }

    float o[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

    for (int rd = 0; rd < rounds; rd++) {
        const int st = rd % ST, kt = rd * KS + grp;
        load((rd + ST - 1) % ST, rd + ST - 1);   // into the stage round rd - 1 read (freed by its last barrier)
        asm volatile("cp.async.wait_group %0;\n" ::"n"(ST - 1));   // round rd's group has landed
        __syncthreads();
        if (kt < nkt) {  // (warp-uniform) this key group's tile of the round
            const bf16 *kb = fa_smem + ((grp * ST + st) * 2) * TILE, *vb = kb + TILE;

            // S = Q K^T: s[n] is keys j0 + 8n .. + 7 (this lane: 2c, 2c + 1) of rows ra (s[n][0..1]), rb ([2..3])
            float s[8][4];
#pragma unroll
            for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    u32 r[4];
                    const int mat = lane >> 3;
                    ldmatrix_x4(r, kb + (np * 16 + (lane & 7) + (mat >> 1) * 8) * FA_ROW + kk * 16 + (mat & 1) * 8);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma_bf16(s[2 * np], qf[kk], b0);
                    mma_bf16(s[2 * np + 1], qf[kk], b1);
                }
            }
            const int j0 = kt * FA_BK;
            if (j0 + FA_BK > wmin) {  // causal / length mask
#pragma unroll
                for (int n = 0; n < 8; n++) {
                    const int j = j0 + n * 8 + 2 * c;
                    if (j >= lim_a) s[n][0] = -INFINITY;
                    if (j + 1 >= lim_a) s[n][1] = -INFINITY;
                    if (j >= lim_b) s[n][2] = -INFINITY;
                    if (j + 1 >= lim_b) s[n][3] = -INFINITY;
                }
            }
            // online softmax (a row's 64 scores live in the 4 lanes of a quad)
            float mx_a = m_a, mx_b = m_b;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                mx_a = fmaxf(mx_a, fmaxf(s[n][0], s[n][1]));
                mx_b = fmaxf(mx_b, fmaxf(s[n][2], s[n][3]));
            }
#pragma unroll
            for (int x = 1; x <= 2; x <<= 1) {
                mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, x));
                mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, x));
            }
            const float base_a = mx_a == -INFINITY ? 0.f : mx_a, base_b = mx_b == -INFINITY ? 0.f : mx_b;
            const float corr_a = fast_exp2(m_a - base_a), corr_b = fast_exp2(m_b - base_b);
            m_a = mx_a;
            m_b = mx_b;
            u32 pf[4][4];  // P as A fragments, key step kk = keys j0 + 16 kk ..
            float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const u32 pa = pack_bf16(fast_exp2(s[n][0] - base_a), fast_exp2(s[n][1] - base_a));
                const u32 pb = pack_bf16(fast_exp2(s[n][2] - base_b), fast_exp2(s[n][3] - base_b));
                pf[n >> 1][2 * (n & 1)] = pa;
                pf[n >> 1][2 * (n & 1) + 1] = pb;
                const float2 fa = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&pa));
                const float2 fb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&pb));
                sum_a += fa.x + fa.y;
                sum_b += fb.x + fb.y;
            }
            l_a = l_a * corr_a + sum_a;
            l_b = l_b * corr_b + sum_b;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                o[n][0] *= corr_a;
                o[n][1] *= corr_a;
                o[n][2] *= corr_b;
                o[n][3] *= corr_b;
            }
            // O += P V: V rows are keys (k), columns dims (n): B fragments through ldmatrix.trans
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
#pragma unroll
                for (int dp = 0; dp < 4; dp++) {
                    u32 r[4];
                    ldmatrix_x4_trans(r, vb + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * FA_ROW + dp * 16 +
                                             (lane >> 4) * 8);
                    const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                    mma_bf16(o[2 * dp], pf[kk], b0);
                    mma_bf16(o[2 * dp + 1], pf[kk], b1);
                }
            }
        }
        __syncthreads();  // the next round's load overwrites the stage read here
    }
    if constexpr (KS > 1) {  // merge the key groups' (o, m, l) into group 0 (shared memory is free now)
        float *red = reinterpret_cast<float *>(fa_smem);  // [KS - 1][GW][36 values][32 lanes]
        if (grp > 0) {
            float *mine = red + ((grp - 1) * GW + wl) * 36 * 32 + lane;
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) mine[(n * 4 + e) * 32] = o[n][e];
            mine[32 * 32] = m_a;
            mine[33 * 32] = m_b;
            mine[34 * 32] = l_a;
            mine[35 * 32] = l_b;
        }
        __syncthreads();
        if (grp > 0) return;
#pragma unroll
        for (int k = 1; k < KS; k++) {
            const float *oth = red + ((k - 1) * GW + wl) * 36 * 32 + lane;
            const float m2a = oth[32 * 32], m2b = oth[33 * 32];
            const float na = fmaxf(m_a, m2a), nb = fmaxf(m_b, m2b);
            const float base_a = na == -INFINITY ? 0.f : na, base_b = nb == -INFINITY ? 0.f : nb;
            const float sa = fast_exp2(m_a - base_a), ta = fast_exp2(m2a - base_a);
            const float sb = fast_exp2(m_b - base_b), tb = fast_exp2(m2b - base_b);
#pragma unroll
            for (int n = 0; n < 8; n++) {
                o[n][0] = o[n][0] * sa + oth[(n * 4 + 0) * 32] * ta;
                o[n][1] = o[n][1] * sa + oth[(n * 4 + 1) * 32] * ta;
                o[n][2] = o[n][2] * sb + oth[(n * 4 + 2) * 32] * tb;
                o[n][3] = o[n][3] * sb + oth[(n * 4 + 3) * 32] * tb;
            }
            l_a = l_a * sa + oth[34 * 32] * ta;
            l_b = l_b * sb + oth[35 * 32] * tb;
            m_a = na;
            m_b = nb;
        }
    }
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
        l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
        l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
    }
    const float inv_a = l_a > 0.f ? 1.f / l_a : 0.f, inv_b = l_b > 0.f ? 1.f / l_b : 0.f;
    bf16 *oa = out + ((size_t)(t0 + ra) * n_heads + h) * ATT_D;
    bf16 *ob = out + ((size_t)(t0 + rb) * n_heads + h) * ATT_D;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int d = n * 8 + 2 * c;
        if (ra < nrows)
            *reinterpret_cast<__nv_bfloat162 *>(oa + d) = __floats2bfloat162_rn(o[n][0] * inv_a, o[n][1] * inv_a);
        if (rb < nrows)
            *reinterpret_cast<__nv_bfloat162 *>(ob + d) = __floats2bfloat162_rn(o[n][2] * inv_b, o[n][3] * inv_b);
    }
}

// Grid (n_kv, n_tiles); q float32 [T, n_heads * D]; caches bf16 [num_slots, n_kv * D]; out bf16 [T, n_heads * D];
// dynamic shared memory KS * ST * 18,432 bytes (ST stages of a K and a V tile per key group).
//   flash_prefill:    16-token tiles, one key group (ATT_G warps)
//   flash_prefill_k2: 16-token tiles, two key groups (2 * ATT_G warps): for grids too small to fill the GPU
//   flash_prefill_64: 64-token tiles, one key group (4 * ATT_G warps)
// each with two stages (a round's K/V lands while the one before is computed), and as _s3 with three (two
// rounds in flight: for a latency-bound walk; launchers.Kernels.flash_stages, AOTX_FLASH_STAGES).
#define FA_ARGS                                                                                                   \
    const float *__restrict__ q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,               \
        const int *__restrict__ tiles, const int *__restrict__ tok_seq, const int *__restrict__ positions,         \
        const int *__restrict__ context_lens, const int *__restrict__ block_tables, int bt_stride, int page_size, \
        float scale, int n_kv, bf16 *__restrict__ out
#define FA_PASS q, k_cache, v_cache, tiles, tok_seq, positions, context_lens, block_tables, bt_stride, page_size, scale, n_kv, out

#define FA_KERNEL(NAME, MW, KS, ST)                                                  \
    extern "C" __global__ void __launch_bounds__(32 * ATT_G * MW * KS) NAME(FA_ARGS) { \
        pdl_wait();                                                                  \
        pdl_trigger();                                                               \
        flash_tile<MW, KS, ST>(FA_PASS);                                             \
    }

FA_KERNEL(flash_prefill, 1, 1, 2)
FA_KERNEL(flash_prefill_k2, 1, 2, 2)
FA_KERNEL(flash_prefill_64, 4, 1, 2)
FA_KERNEL(flash_prefill_s3, 1, 1, 3)
FA_KERNEL(flash_prefill_k2_s3, 1, 2, 3)
FA_KERNEL(flash_prefill_64_s3, 4, 1, 3)
