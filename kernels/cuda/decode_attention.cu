// Paged attention (GQA) on tensor cores for large decode steps. Twin: kernels.cuda.decode_attention_twin
// (this algorithm, its bf16 roundings, in numpy); semantics: kernels.ops_attention.paged_attention, the same
// as paged_attention in attention.cu (token t of sequence s = tok_seq[t] sees keys j < min(positions[t] + 1,
// context_lens[s])), the same arguments and the same split partials (attention_combine merges them).
// Plan: kernels.cuda.decode_plan (AOTX_DECODE_MMA).
//
// One block per (KV head, query token, split): grid (n_kv, T, nsplit), the KV head fastest, so the blocks of
// one token that run side by side read each cache row (all KV heads of a slot, contiguous) together. The
// block has NW warps; each is an independent key group: warp w walks the split's key tiles w, w + NW, ... of
// BK keys, streaming them through its own ST-stage cp.async pipeline in its own shared memory (no block
// barrier inside the walk). Each K/V row is loaded once for the KV head's ATT_G query heads: they are the
// rows of the mma M tile (m16n8k16, bf16 in, float32 accumulate; rows ATT_G..7 are zero padding).
//   S = Q K^T:  A = q (rows g: the group's heads, pre-scaled by scale * log2 e, bf16), B = K rows (ldmatrix);
//   online softmax in float32, base 2, a row's scores in the 4 lanes of a quad;
//   O += P V:   A = P (the softmax numerators exp2(S - max) in bf16; its row sums use the values the mma sees),
//               B = V rows (ldmatrix.trans).
// SPLIT (the default variants): rows g + 8 of the M tile, zero padding otherwise, carry the bf16 remainders
// q_lo = bf16(q - q_hi) and P_lo = bf16(P - P_hi), so one mma gives both halves' products in the same lane
// (accumulators [0..1]: rows g, [2..3]: rows g + 8) and S = S_hi + S_lo, O = O_hi + O_lo at no extra mma: q and
// P carry ~16 mantissa bits instead of 8 (K and V are bf16 in the cache, exact). Without SPLIT (the _bf16
// variants, session 11's rounding, kept as the peer of the bench and the checks) rows g + 8 are zero.
// The warps' (o, m, l) merge through shared memory at the end; with nsplit == 1 the block writes the
// normalised bf16 output, else unnormalised partials (m in natural-log units) that attention_combine (a second
// launch) merges. (Merging them in the kernel by each group's last split, through an atomic counter, measured
// slower on an H100 in every shape: docs/PERFORMANCE.md, session 11.)
// Cache layout bf16 [num_slots, n_kv * D]; q float32 [T, n_heads * D]; out bf16 [T, n_heads * D].
#include "mma.cuh"

#define DA_ROW (ATT_D + 8)  // padded shared row (144 bytes): conflict-free ldmatrix and cp.async rows
static_assert(ATT_D == 64, "fragments are laid out for head dim 64");
static_assert(ATT_G <= 8, "the group's query heads are rows 0..7 of the M tile");

// the bf16 remainders (x0 - hi.lo, x1 - hi.hi) of two floats packed as bf16 in hi: packed bf16 too (x - bf16(x) is
// exact in float32; its own bf16 rounding leaves ~2^-17 |x|)
__device__ __forceinline__ u32 bf16_rest(float x0, float x1, u32 hi) {
    const float2 h = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&hi));
    return pack_bf16(x0 - h.x, x1 - h.y);
}

__device__ __forceinline__ float da_exp2(float x) {  // ex2.approx(-inf) = +0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// cp_async16 (mma.cuh) with an L2 prefetch-size hint (PF = 256: the DRAM fetch of a 128-byte K/V row also
// brings the next 128 bytes, the same slot's next KV head, which the neighbouring block reads)
template <int PF>
__device__ __forceinline__ void da_cp_async16(void *smem, const void *gmem, int src_bytes) {
    if constexpr (PF == 256) {
        unsigned s = (unsigned)__cvta_generic_to_shared(smem);
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
    } else {
        cp_async16(smem, gmem, src_bytes);
    }
}

// dynamic shared memory: NW warps x ST stages x (K, V) x BK rows x DA_ROW bf16 (decode_plan.smem_bytes)
template <int NW, int BK, int ST, int PF, bool SPLIT>
__device__ __forceinline__ void decode_unit(const float *__restrict__ q, const bf16 *__restrict__ k_cache,
                                            const bf16 *__restrict__ v_cache, const int *__restrict__ tok_seq,
                                            const int *__restrict__ positions, const int *__restrict__ context_lens,
                                            const int *__restrict__ block_tables, int bt_stride, int page_size,
                                            float scale, int n_kv, int nsplit, bf16 *__restrict__ out,
                                            float *__restrict__ part_o, float *__restrict__ part_ml, const int kvh,
                                            const int t, const int split) {
    static_assert(BK % 16 == 0 && BK >= 16, "key tiles of whole mma k-steps");
    static_assert(ST >= 2, "one stage computed while the next lands");
    constexpr int TILE = BK * DA_ROW;        // one K (or V) tile, bf16 elements
    constexpr int PER_LANE = BK * 8 / 32;    // 16-byte pieces of a K (and of a V) tile a lane copies
    constexpr int NT = BK / 8;               // n8 tiles of S
    extern __shared__ __align__(16) bf16 da_smem[];

    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;   // mma fragment row (query head of the group) and column pair
    const int n_heads = n_kv * ATT_G, kv_width = n_kv * ATT_D;
    const int seq = tok_seq[t];
    const int L = min(positions[t] + 1, context_lens[seq]);   // keys j < L (L <= 0: none)
    const int ntiles = L > 0 ? (L + BK - 1) / BK : 0;
    const int per = (ntiles + nsplit - 1) / nsplit;
    const int tb = min(ntiles, split * per), te = min(ntiles, tb + per);
    const int nmine = te - tb > w ? (te - tb - w + NW - 1) / NW : 0;   // this warp's tiles: tb + w + i NW
    const int *bt = block_tables + (size_t)seq * bt_stride;
    const int ps_shift = (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
    bf16 *const wsm = da_smem + w * (ST * 2 * TILE);

    // the warp's i-th tile into stage st (past its last tile: an empty group, so the waits stay uniform);
    // lane copies row (lane / 8) + 4 u, 16-byte piece lane % 8, of K and of V; rows j >= L zero-filled
    auto load = [&](int st, int i) {
        if (i < nmine) {
            const int j0 = (tb + w + i * NW) * BK;
            int slot[PER_LANE];
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) {
                const int j = j0 + (lane >> 3) + 4 * u;
                const int page = ps_shift >= 0 ? j >> ps_shift : j / page_size;
                const int in_page = ps_shift >= 0 ? j & (page_size - 1) : j % page_size;
                slot[u] = j < L ? bt[page] * page_size + in_page : -1;
            }
#pragma unroll
            for (int u = 0; u < PER_LANE; u++) {
                const int row = (lane >> 3) + 4 * u, piece = lane & 7;
                const size_t off = slot[u] >= 0 ? (size_t)slot[u] * kv_width + kvh * ATT_D + piece * 8 : 0;
                bf16 *kdst = wsm + st * 2 * TILE + row * DA_ROW + piece * 8;
                da_cp_async16<PF>(kdst, k_cache + off, slot[u] >= 0 ? 16 : 0);
                da_cp_async16<PF>(kdst + TILE, v_cache + off, slot[u] >= 0 ? 16 : 0);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int s = 0; s < ST - 1; s++) load(s, s);

    // Q as A fragments: row g < ATT_G is head kvh * ATT_G + g, dims 16 kk + 2c (+1) and + 8; rows g + 8 its
    // bf16 remainder (SPLIT) or zero; rows ATT_G..7 (and their g + 8) zero
    const float qscale = scale * 1.4426950408889634f;
    u32 qf[4][4];
    {
        const bool real = g < ATT_G;
        const float *qh = q + ((size_t)t * n_heads + kvh * ATT_G + (real ? g : 0)) * ATT_D;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            const int d = kk * 16 + 2 * c;
            const float2 a0 = real ? *reinterpret_cast<const float2 *>(qh + d) : make_float2(0.f, 0.f);
            const float2 a1 = real ? *reinterpret_cast<const float2 *>(qh + d + 8) : make_float2(0.f, 0.f);
            // __fmul_rn: the float32 product, never contracted into bf16_rest's subtraction (the twin's rounding)
            const float x0 = __fmul_rn(a0.x, qscale), x1 = __fmul_rn(a0.y, qscale);
            const float x2 = __fmul_rn(a1.x, qscale), x3 = __fmul_rn(a1.y, qscale);
            qf[kk][0] = pack_bf16(x0, x1);
            qf[kk][2] = pack_bf16(x2, x3);
            qf[kk][1] = SPLIT ? bf16_rest(x0, x1, qf[kk][0]) : 0u;
            qf[kk][3] = SPLIT ? bf16_rest(x2, x3, qf[kk][2]) : 0u;
        }
    }

    float o[8][4];   // O rows g (o[n][0..1]: dims 8n + 2c, + 1) and g + 8 (o[n][2..3]: P_lo V, or zero)
#pragma unroll
    for (int n = 0; n < 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m_a = -INFINITY, l_a = 0.f;   // row g's running max (base 2, quad-uniform) and this lane's sum share

    for (int i = 0; i < nmine; i++) {
        load((i + ST - 1) % ST, i + ST - 1);   // into the stage tile i - 1 read (freed by its __syncwarp)
        asm volatile("cp.async.wait_group %0;\n" ::"n"(ST - 1));   // tile i has landed (this lane's copies)
        __syncwarp();                                                // ... and every lane's
        const bf16 *kb = wsm + (i % ST) * 2 * TILE, *vb = kb + TILE;
        const int j0 = (tb + w + i * NW) * BK;

        // S = Q K^T: s[n] is keys j0 + 8n + 2c, + 1 of row g (s[n][0..1]); s[n][2..3] rows g + 8 (q_lo K)
        float s[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                u32 r[4];
                const int mat = lane >> 3;
                ldmatrix_x4(r, kb + (np * 16 + (lane & 7) + (mat >> 1) * 8) * DA_ROW + kk * 16 + (mat & 1) * 8);
                const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                mma_bf16(s[2 * np], qf[kk], b0);
                mma_bf16(s[2 * np + 1], qf[kk], b1);
            }
        }
        if constexpr (SPLIT) {
#pragma unroll
            for (int n = 0; n < NT; n++) {
                s[n][0] += s[n][2];
                s[n][1] += s[n][3];
            }
        }
        if (j0 + BK > L) {   // the last tile: keys past L
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const int j = j0 + n * 8 + 2 * c;
                if (j >= L) s[n][0] = -INFINITY;
                if (j + 1 >= L) s[n][1] = -INFINITY;
            }
        }
        float mx = m_a;
#pragma unroll
        for (int n = 0; n < NT; n++) mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = mx == -INFINITY ? 0.f : mx;
        const float corr = da_exp2(m_a - base);
        m_a = mx;
        u32 pf[BK / 16][4];   // P as A fragments, key step kk = keys j0 + 16 kk ..; rows g + 8 P_lo (or zero)
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NT; n++) {
            const float p0 = da_exp2(s[n][0] - base), p1 = da_exp2(s[n][1] - base);
            const u32 pa = pack_bf16(p0, p1);
            const u32 pb = SPLIT ? bf16_rest(p0, p1, pa) : 0u;
            pf[n >> 1][2 * (n & 1)] = pa;
            pf[n >> 1][2 * (n & 1) + 1] = pb;
            const float2 fa = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&pa));
            if constexpr (SPLIT) {
                const float2 fb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&pb));
                sum += (fa.x + fb.x) + (fa.y + fb.y);
            } else {
                sum += fa.x + fa.y;
            }
        }
        l_a = l_a * corr + sum;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            o[n][0] *= corr;
            o[n][1] *= corr;
            if constexpr (SPLIT) {
                o[n][2] *= corr;
                o[n][3] *= corr;
            }
        }
        // O += P V: V rows are keys (k), columns dims (n): B fragments through ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
#pragma unroll
            for (int dp = 0; dp < 4; dp++) {
                u32 r[4];
                ldmatrix_x4_trans(r, vb + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DA_ROW + dp * 16 +
                                         (lane >> 4) * 8);
                const u32 b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
                mma_bf16(o[2 * dp], pf[kk], b0);
                mma_bf16(o[2 * dp + 1], pf[kk], b1);
            }
        }
        __syncwarp();   // every lane is done with this stage before a later load overwrites it
    }
    asm volatile("cp.async.wait_group 0;\n" ::);   // (only empty groups can be left; nothing lands late)
    if constexpr (SPLIT) {   // O = O_hi + O_lo (rows g and g + 8 of the same lane)
#pragma unroll
        for (int n = 0; n < 8; n++) {
            o[n][0] += o[n][2];
            o[n][1] += o[n][3];
        }
    }

    // merge the warps' (o, m, l) into warp 0: each warp's values in its own part of shared memory
    float *red = reinterpret_cast<float *>(da_smem);   // [NW][18 values][32 lanes]
    if constexpr (NW > 1) {
        static_assert(NW * 18 * 32 * 4 <= NW * ST * 2 * TILE * 2, "the merge fits the warps' stages");
        __syncthreads();   // every warp is past its walk: the stages are free
        if (w > 0) {
            float *mine = red + w * 18 * 32 + lane;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                mine[(2 * n) * 32] = o[n][0];
                mine[(2 * n + 1) * 32] = o[n][1];
            }
            mine[16 * 32] = m_a;
            mine[17 * 32] = l_a;
        }
        __syncthreads();
        if (w > 0) return;
#pragma unroll
        for (int k = 1; k < NW; k++) {
            const float *oth = red + k * 18 * 32 + lane;
            const float m2 = oth[16 * 32];
            const float nm = fmaxf(m_a, m2);
            const float base = nm == -INFINITY ? 0.f : nm;
            const float sa = da_exp2(m_a - base), sb = da_exp2(m2 - base);
#pragma unroll
            for (int n = 0; n < 8; n++) {
                o[n][0] = o[n][0] * sa + oth[(2 * n) * 32] * sb;
                o[n][1] = o[n][1] * sa + oth[(2 * n + 1) * 32] * sb;
            }
            l_a = l_a * sa + oth[17 * 32] * sb;
            m_a = nm;
        }
    }
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    if (g >= ATT_G) return;
    const int h = kvh * ATT_G + g;
    if (nsplit == 1) {
        const float inv = l_a > 0.f ? 1.f / l_a : 0.f;
        bf16 *oh = out + ((size_t)t * n_heads + h) * ATT_D;
#pragma unroll
        for (int n = 0; n < 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(oh + n * 8 + 2 * c) = __floats2bfloat162_rn(o[n][0] * inv, o[n][1] * inv);
    } else {
        const size_t p = ((size_t)t * n_heads + h) * nsplit + split;
#pragma unroll
        for (int n = 0; n < 8; n++)
            *reinterpret_cast<float2 *>(part_o + p * ATT_D + n * 8 + 2 * c) = make_float2(o[n][0], o[n][1]);
        if (c == 0) {
            part_ml[2 * p] = m_a * 0.6931471805599453f;   // natural-log units (attention_combine)
            part_ml[2 * p + 1] = l_a;
        }
    }
}

// Grid (n_kv, T, nsplit), 32 NW threads, dynamic shared memory NW * ST * 2 * BK * 144 bytes.
//   decode_attention_w<NW>_k<BK>_s<ST>[_l2][_bf16]   (kernels.cuda.decode_plan.VARIANTS; _l2: the L2::256B
//   hint; _bf16: q and P in one bf16 each, no SPLIT)
#define DA_ARGS                                                                                                  \
    const float *__restrict__ q, const bf16 *__restrict__ k_cache, const bf16 *__restrict__ v_cache,              \
        const int *__restrict__ tok_seq, const int *__restrict__ positions, const int *__restrict__ context_lens, \
        const int *__restrict__ block_tables, int bt_stride, int page_size, float scale, int n_kv, int nsplit,    \
        bf16 *__restrict__ out, float *__restrict__ part_o, float *__restrict__ part_ml
#define DA_KERNEL(NAME, NW, BK, ST, PF, SPLIT)                                                               \
    extern "C" __global__ void __launch_bounds__(32 * NW) NAME(DA_ARGS) {                                     \
        pdl_wait();                                                                                           \
        pdl_trigger();                                                                                        \
        decode_unit<NW, BK, ST, PF, SPLIT>(q, k_cache, v_cache, tok_seq, positions, context_lens, block_tables, \
                                           bt_stride, page_size, scale, n_kv, nsplit, out, part_o, part_ml,   \
                                           blockIdx.x, blockIdx.y, blockIdx.z);                               \
    }

DA_KERNEL(decode_attention_w4_k16_s4, 4, 16, 4, 0, true)
DA_KERNEL(decode_attention_w4_k16_s3, 4, 16, 3, 0, true)
DA_KERNEL(decode_attention_w2_k16_s4, 2, 16, 4, 0, true)
DA_KERNEL(decode_attention_w8_k16_s3, 8, 16, 3, 0, true)
DA_KERNEL(decode_attention_w4_k16_s4_l2, 4, 16, 4, 256, true)
DA_KERNEL(decode_attention_w2_k16_s4_bf16, 2, 16, 4, 0, false)
