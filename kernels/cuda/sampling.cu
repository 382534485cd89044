// Sampling on the GPU: the counter-based draw of kernels/sampler.py, exactly (its module docstring is
// the specification). One block of 1024 threads per row; only the token id leaves the device.
//
// Order "raw logit desc, then id asc" is the order of a 64-bit key (sortable logit bits << 32 |
// ~id), larger key first. Every cut the spec makes (top-k, nucleus, the draw) is "the first token in
// that order whose inclusive cumulative weight exceeds X", found by a radix search over the key, one
// byte per pass, with a 256-bin histogram of uint64 weights in shared memory. No sort is ever done, and
// no pass computes a total: each search's first histogram holds its candidates' total (x_of). So a
// sampled row costs a pass for its max, then two or three passes per search (the later ones touch only
// the tokens that agree with the prefix so far).
//
// Penalties and logit_bias (kernels/logit_adjust.py): ``adjust_rows`` first writes each adjusted
// row's logits into a scratch row; ``sample_rows`` reads that scratch row where ``adj_row[r] >= 0``
// (rows without adjustments read the logits in place and pay one int load). min_p is one more
// weight threshold (``wmin``): a token whose weight is below it is dropped like a zero weight.
//
// Token masks (structured outputs; kernels/token_mask.py): where ``mask_row[r] >= 0`` every read of
// row r's logit v goes through the bitmask ``mask_bits[mask_row[r]]`` (uint32 [words]; bit v & 31 of
// word v >> 5): a token not allowed reads as -inf, as if token_mask_rows had masked a copy first (the
// same values, so the same ids), without the copy. ``mask_row`` null: no row is masked.
#include "common.cuh"

#define SAMPLE_THREADS 1024
#define GOLDEN 0x9E3779B97F4A7C15ull

__device__ __forceinline__ u64 splitmix64(u64 x) {
    u64 z = x + GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// floor (or ceil) of a * total / 2^24, exact (a < 2^25, total < 2^49: the product needs 128 bits).
__device__ __forceinline__ u64 mul_shift24(u64 a, u64 total, bool round_up) {
    u64 lo = a * total, hi = __umul64hi(a, total);
    u64 q = (hi << 40) | (lo >> 24);
    if (round_up && (lo & 0xFFFFFFull)) q += 1;
    return q;
}

__device__ __forceinline__ u64 order_key(float l, int id) {
    if (l == 0.f) l = 0.f;  // -0 and +0 tie (the spec compares values)
    u32 b = __float_as_uint(l);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((u64)b << 32) | (u64)(0xFFFFFFFFu - (u32)id);
}

// row logit i, -inf where the row's mask (mb: null when unmasked) does not allow token i
__device__ __forceinline__ float logit_at(const float *l, const u32 *mb, int words, int i) {
    if (mb != nullptr) {
        u32 w = (i >> 5) < words ? mb[i >> 5] : 0u;
        if (!((w >> (i & 31)) & 1u)) return -INFINITY;
    }
    return l[i];
}

// floor(e * 2^32) for a float32 e in [0, 1], exactly, in integer arithmetic (no float64 conversions):
// e = m * 2^(E - 23) with m its 24-bit significand, so e * 2^32 = m * 2^(E + 9), E + 9 <= 9. A
// subnormal or zero e gives 0 (it is below 2^-126); NaN gives 0 as the float64 conversion did.
__device__ __forceinline__ u64 weight_bits(float e) {
    const u32 b = __float_as_uint(e);
    const int s = (int)((b >> 23) & 0xFFu) - 127 + 9;
    const u64 m = (u64)((b & 0x7FFFFFu) | 0x800000u);
    if (s > 9 || (b >> 31)) return 0ull;  // NaN, or a negative value (never from exp)
    return s >= 0 ? m << s : (s > -24 ? m >> -s : 0ull);
}

__device__ __forceinline__ u64 weight_of(float l, float inv_t, float m, u64 wmin) {
    float e = expf(__fsub_rn(__fmul_rn(l, inv_t), m));  // no FMA contraction: z = l*inv_t, then z - m
    u64 w = weight_bits(e);
    return w >= wmin ? w : 0ull;
}

// What a search looks for, X, from T = the candidates' total (their weights, or their count), which its
// first pass's histogram gives (so no pass of its own computes a total):
#define X_TOPK 0     // X = xparam (k - 1), counting; T <= X (k or fewer candidates): no cut, the key 0
#define X_NUCLEUS 1  // X = ceil(p24 * T / 2^24) - 1 (or 0), xparam = p24: the nucleus' last token
#define X_DRAW 2     // X = floor(u24 * T / 2^24), xparam = u24: the drawn token

__device__ __forceinline__ u64 x_of(int xmode, u64 xparam, u64 T) {
    if (xmode == X_TOPK) return xparam;
    if (xmode == X_NUCLEUS) {
        u64 need = mul_shift24(xparam, T, true);
        return need ? need - 1 : 0;
    }
    return mul_shift24(xparam, T, false);
}

// One radix pass's selection, by warp 0 (every lane calls it): from the pass's 256-bin totals (tot: weights or
// counts; ntot: candidates a bin) pick the digit whose bin holds the first candidate, in order, past X, and
// write sel = {prefix with that digit, the weight above the bin, candidates in the bin, stop}. X is set at the
// first pass (shift 56) from the candidates' total (x_of). Lane L owns bins 8L..8L+7, highest digit first.
__device__ __forceinline__ void select_digit(const u64 *tot, const u32 *ntot, int shift, u64 prefix, u64 base,
                                             int xmode, u64 xparam, u64 &X, u64 *sel) {
    const int lane = threadIdx.x & 31;
    u64 own = 0;
#pragma unroll
    for (int b = 0; b < 8; b++) own += tot[8 * lane + b];
    u64 suffix = own;  // sum over lanes >= L
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u64 v = __shfl_down_sync(0xffffffffu, suffix, o);
        if (lane + o < 32) suffix += v;
    }
    if (shift == 56) X = x_of(xmode, xparam, __shfl_sync(0xffffffffu, suffix, 0));  // lane 0: all bins
    const bool none = shift == 56 && xmode == X_TOPK && __shfl_sync(0xffffffffu, suffix, 0) <= X;
    unsigned hit = __ballot_sync(0xffffffffu, base + suffix > X);
    int L = none ? -1 : 31 - __clz(hit);
    if (none && lane == 0) {  // k or fewer candidates: top-k cuts nothing
        sel[0] = 0;
        sel[1] = 0;
        sel[2] = 0;
        sel[3] = 1;
    }
    if (lane == L) {
        u64 acc = base + suffix - own;  // bins above this lane's
        int d = 8 * lane + 7;
        for (; d > 8 * lane; d--) {
            if (acc + tot[d] > X) break;
            acc += tot[d];
        }
        sel[0] = prefix | ((u64)d << shift);
        sel[1] = acc;
        sel[2] = ntot[d];
        sel[3] = 0;
    }
}

// Greedy's order: a larger value first, then the lower id; NaN never wins (both comparisons are false).
__device__ __forceinline__ void argmax_take(float &best, int &bid, float v, int i) {
    if (v > best || (v == best && i < bid)) { best = v; bid = i; }
}

// The block's argmax of row l over [lo, hi) (read through the mask mb), valid in thread 0 (fscratch, iscratch:
// a slot a warp); THREADS is blockDim.x. bid 0x7fffffff: no token (or every one NaN).
template <int THREADS>
__device__ __forceinline__ void block_argmax(const float *l, const u32 *mb, int words, int lo, int hi,
                                             float *fscratch, int *iscratch, float &best, int &bid) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    best = -INFINITY;
    bid = 0x7fffffff;
#pragma unroll 4
    for (int i = lo + tid; i < hi; i += THREADS) argmax_take(best, bid, logit_at(l, mb, words, i), i);
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bid, o);
        argmax_take(best, bid, ov, oi);
    }
    if (lane == 0) { fscratch[warp] = best; iscratch[warp] = bid; }
    __syncthreads();
    if (tid == 0)
        for (int w = 1; w < THREADS / 32; w++) argmax_take(best, bid, fscratch[w], iscratch[w]);
}

// The key of the first candidate (w > 0, key >= kmin), in order, whose inclusive cumulative weight
// (w, or 1 per token when count) exceeds X (x_of: T > X always holds for the nucleus and the draw, since
// the row's top token is always a candidate; for top-k, T <= X answers 0).
// Per pass, the lanes of a warp that fall into the same bin add their weights first (__match_any_sync +
// __reduce_add_sync on 16-bit parts: a weight is at most 2^32), so one atomic per bin and warp reaches
// shared memory: most tokens share the key's top bytes, and their atomics on one bin serialised. Once
// the chosen bin holds a single candidate, that candidate is the answer: one pass finds it instead of
// the remaining byte passes. A warp with no candidate in a pass skips the grouping. Integer sums, so the
// result is the same key whatever the grouping.
__device__ u64 radix_search(const float *l, const u32 *mb, int words, int vocab, float inv_t, float m, u64 wmin,
                            u64 kmin, bool count, int xmode, u64 xparam, u64 *hist, u32 *nhist, u64 *shared2) {
    u64 prefix = 0, base = 0, X = 0;  // X: known to warp 0 (the only one that selects) after the first pass
    int tid = threadIdx.x, lane = tid & 31;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += blockDim.x) { hist[i] = 0; nhist[i] = 0; }
        __syncthreads();
        for (int i0 = 0; i0 < vocab; i0 += blockDim.x) {  // the same trip count in every lane of a warp
            const int i = i0 + tid;
            int bin = -1;
            u64 v = 0;
            if (i < vocab) {  // the key's filters first: after the first pass few tokens reach the exp
                float li = logit_at(l, mb, words, i);
                u64 key = order_key(li, i);
                if (key >= kmin && (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))) {
                    u64 w = weight_of(li, inv_t, m, wmin);
                    if (w != 0) {
                        bin = (int)((key >> shift) & 255);
                        v = count ? 1ull : w;
                    }
                }
            }
            if (__ballot_sync(0xffffffffu, bin >= 0) == 0u) continue;  // no candidate in this warp (uniform)
            const unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin >= 0) {
                u64 lo = __reduce_add_sync(peers, (unsigned)(v & 0xFFFFull));
                u64 mid = __reduce_add_sync(peers, (unsigned)((v >> 16) & 0xFFFFull));
                u64 hi = __reduce_add_sync(peers, (unsigned)(v >> 32));
                if (lane == __ffs(peers) - 1) {
                    atomicAdd(&hist[bin], lo + (mid << 16) + (hi << 32));
                    atomicAdd(&nhist[bin], (u32)__popc(peers));
                }
            }
        }
        __syncthreads();
        if (tid < 32) select_digit(hist, nhist, shift, prefix, base, xmode, xparam, X, shared2);
        __syncthreads();
        prefix = shared2[0];
        base = shared2[1];
        const bool single = shared2[2] == 1ull, stop = shared2[3] != 0;
        __syncthreads();
        if (stop) return 0ull;
        if (single && shift > 0) {  // the one candidate whose key agrees with prefix down to this digit
            for (int i = tid; i < vocab; i += blockDim.x) {
                float li = logit_at(l, mb, words, i);
                u64 key = order_key(li, i);
                if ((key >> shift) == (prefix >> shift) && key >= kmin && weight_of(li, inv_t, m, wmin) != 0)
                    shared2[0] = key;
            }
            __syncthreads();
            prefix = shared2[0];
            __syncthreads();
            break;
        }
    }
    return prefix;
}

__device__ __forceinline__ float adjusted(float l, float bias, int c, float presence, float frequency) {
    float pen = __fadd_rn(__fmul_rn(frequency, (float)c), c > 0 ? presence : 0.f);
    return __fadd_rn(l, __fsub_rn(bias, pen));
}

// One block per adjusted row a: scratch[a] = logits[rows[src_row[a]]] with the penalties and biases of
// entries offsets[a]..offsets[a+1] (token, count, bias) applied; pending[a] >= 0 names one more output
// token by its index in the step's token ids (``tokens``, on the device: the one-step-behind loop).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
adjust_rows(const float *__restrict__ logits, const int *__restrict__ rows, const int *__restrict__ src_row,
            int vocab, const int *__restrict__ offsets, const int *__restrict__ token,
            const int *__restrict__ count, const float *__restrict__ bias, const float *__restrict__ presence,
            const float *__restrict__ frequency, const int *__restrict__ pending, const int *__restrict__ tokens,
            float *__restrict__ scratch) {
    pdl_wait();
    pdl_trigger();
    __shared__ int found;
    const int a = blockIdx.x, tid = threadIdx.x;
    const float *l = logits + (size_t)rows[src_row[a]] * vocab;
    float *dst = scratch + (size_t)a * vocab;
    for (int i = tid; i < vocab; i += blockDim.x) dst[i] = l[i];
    const int pend = pending[a] >= 0 ? tokens[pending[a]] : -1;
    if (tid == 0) found = 0;
    __syncthreads();
    const float pres = presence[a], freq = frequency[a];
    for (int j = offsets[a] + tid; j < offsets[a + 1]; j += blockDim.x) {
        int t = token[j];
        int c = count[j];
        if (t == pend) { c += 1; found = 1; }
        dst[t] = adjusted(l[t], bias[j], c, pres, freq);
    }
    __syncthreads();
    if (tid == 0 && pend >= 0 && pend < vocab && !found) dst[pend] = adjusted(l[pend], 0.f, 1, pres, freq);
}

// sample_rows' greedy rule for one row (every thread of the block): *out = the argmax, 0 when every logit is NaN.
__device__ __noinline__ void greedy_row(const float *l, const u32 *mb, int words, int vocab, float *fscratch,
                                        int *iscratch, int *out) {
    float best;
    int bid;
    block_argmax<SAMPLE_THREADS>(l, mb, words, 0, vocab, fscratch, iscratch, best, bid);
    if (threadIdx.x == 0) *out = bid == 0x7fffffff ? 0 : bid;
}

// logits float32 [*, vocab]; row r reads logits[rows[r]], or adj_logits[adj_row[r]] (adjust_rows' output)
// where adj_row[r] >= 0; masked through mask_bits[mask_row[r]] where mask_row (not null) has it >= 0.
// out int32 [R].
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_rows(const float *__restrict__ logits, const int *__restrict__ rows, int vocab,
            const float *__restrict__ temperature, const float *__restrict__ top_p, const int *__restrict__ top_k,
            const u64 *__restrict__ seed, const u64 *__restrict__ step, const float *__restrict__ min_p,
            const int *__restrict__ adj_row, const float *__restrict__ adj_logits, int *__restrict__ out,
            const u32 *__restrict__ mask_bits, const int *__restrict__ mask_row, int words) {
    pdl_wait();
    pdl_trigger();
    __shared__ u64 hist[256];
    __shared__ u64 shared2[4];
    __shared__ u32 nhist[256];
    __shared__ float fscratch[32];
    __shared__ int iscratch[32];
    const int r = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int ar = adj_row[r];
    const float *l = ar >= 0 ? adj_logits + (size_t)ar * vocab : logits + (size_t)rows[r] * vocab;
    const int mr = mask_row != nullptr ? mask_row[r] : -1;
    const u32 *mb = mr >= 0 ? mask_bits + (size_t)mr * words : nullptr;
    const float temp = temperature[r];

    if (!(temp > 0.f)) {  // greedy: argmax, lowest id on ties
        greedy_row(l, mb, words, vocab, fscratch, iscratch, out + r);
        return;
    }

    const float inv_t = 1.0f / temp;
    float mx = -INFINITY;
    for (int i = tid; i < vocab; i += blockDim.x) mx = fmaxf(mx, __fmul_rn(logit_at(l, mb, words, i), inv_t));
    mx = warp_max(mx);
    if (lane == 0) fscratch[warp] = mx;
    __syncthreads();
    mx = fscratch[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) mx = fmaxf(mx, fscratch[w]);
    if (!isfinite(mx)) {  // no token weighs anything (+inf, all -inf or NaN, 1/t overflowed): greedy, as the spec
        __syncthreads();  // (mx is the same in every thread; each has read fscratch before greedy_row writes it)
        greedy_row(l, mb, words, vocab, fscratch, iscratch, out + r);
        return;
    }

    const float mp = min_p[r];
    const u64 wmin = mp > 0.f ? max(1ull, (u64)ceil((double)mp * 4294967296.0)) : 1ull;
    u64 kmin = 0;  // top-k: the k-th candidate's key (0: no cut)
    const int k = top_k[r];
    if (k > 0) kmin = radix_search(l, mb, words, vocab, inv_t, mx, wmin, 0, true, X_TOPK, (u64)(k - 1), hist, nhist, shared2);
    u64 kcut = kmin;  // and the nucleus' last token's
    const float p = top_p[r];
    if (p < 1.0f) {
        u64 p24 = (u64)ceil((double)p * 16777216.0);
        kcut = radix_search(l, mb, words, vocab, inv_t, mx, wmin, kmin, false, X_NUCLEUS, p24, hist, nhist, shared2);
    }
    u64 u24 = splitmix64(seed[r] ^ (step[r] * GOLDEN)) >> 40;
    u64 key = radix_search(l, mb, words, vocab, inv_t, mx, wmin, kcut, false, X_DRAW, u24, hist, nhist, shared2);
    if (tid == 0) out[r] = (int)(0xFFFFFFFFu - (u32)(key & 0xFFFFFFFFull));
}

#include "sampling_split.cuh"  // sample_rows_split: a row split over a cluster of blocks (sm_90)
