// sample_rows_split: sample_rows' result (the same ids, bit for bit) with each row split over a thread-block
// cluster of SPLIT_C blocks (sm_90), included by sampling.cu after the helpers it shares.
//
// Why: sample_rows gives a row one block, so at 64 rows 64 SMs work, each with one load in flight per warp
// and the expf, order key and warp grouping of every token done again in every radix pass (a pass reads the
// whole row). Here block c of a row's cluster owns tokens [c*S, c*S + S) (S = ceil(vocab / SPLIT_C)):
//   1. its slice's max of z = l * inv_t (loads unrolled, several in flight); the cluster's max is the
//      fmaxf of the SPLIT_C block maxima, read through distributed shared memory (fmaxf is exact, so any
//      grouping gives the same m);
//   2. the slice's candidates (weight >= wmin, i.e. w != 0 after min_p) compacted into shared memory as
//      (order key, w - 1): most tokens of a sampled row weigh 0 and never reach a pass again;
//   3. each radix search (top-k, nucleus, draw: radix_search's spec, unchanged) runs over the compact list:
//      per pass, every block builds its 256-bin histogram of its candidates, the cluster barrier, then every
//      block sums the SPLIT_C histograms (DSMEM) and selects the digit itself: the same integer totals in
//      every block, so the same digit, prefix and base everywhere (no broadcast, no second barrier). The
//      histograms alternate between two buffers, so a buffer is cleared only after every block has passed the
//      barrier that followed its last read. The "single candidate" shortcut exchanges the one key found
//      (every block reports its own, 0 if none; the max is the key).
// Every control decision depends only on cluster-wide totals, so all blocks take the same path and meet the
// same barriers; a last barrier keeps every block's shared memory alive until the others have read it. A row
// whose max m is not finite has no candidate (kernels/sampler.py 2.): it takes the greedy path (greedy_split,
// its own exchange fields), as sample_rows takes greedy_row.
// Integer sums: the ids do not depend on how a row is split (ops/gpu/sampling_bench compares both kernels).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

#ifndef SPLIT_C
#define SPLIT_C 8         // blocks a row (a cluster: 8 is the portable maximum)
#endif
#define SPLIT_THREADS 512 // >= 256: a thread a histogram bin in the cross-block sum
#define SPLIT_U 4         // compaction: logits a thread loads before it uses the first

__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

// every thread of every block of the cluster: arrive (release) then wait (acquire); also a block barrier
__device__ __forceinline__ void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// the address of `p` (this block's shared memory) in block `rank`'s shared memory
__device__ __forceinline__ u32 peer_addr(const void *p, u32 rank) {
    u32 out, a = (u32)__cvta_generic_to_shared(p);
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(rank));
    return out;
}

__device__ __forceinline__ u64 peer_u64(const void *p, u32 rank) {
    u64 v;
    asm volatile("ld.shared::cluster.u64 %0, [%1];\n" : "=l"(v) : "r"(peer_addr(p, rank)) : "memory");
    return v;
}

__device__ __forceinline__ u32 peer_u32(const void *p, u32 rank) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];\n" : "=r"(v) : "r"(peer_addr(p, rank)) : "memory");
    return v;
}

struct SplitShared {
    u64 hist[2][256];   // this block's histogram of the pass (weights or counts), two buffers
    u32 nhist[2][256];  // candidates a bin
    u64 found[2];       // the single-candidate exchange, by the same buffer index
    u64 tot[256];       // the cluster's histogram (sum over blocks), this pass
    u32 ntot[256];
    u64 shared2[4];     // the selection: prefix, base, candidates in the bin, stop
    float fscratch[SPLIT_THREADS / 32];
    int iscratch[SPLIT_THREADS / 32];
    float bmax;         // this block's max of z, read by the others
    float gbest;        // greedy: this block's max logit and its (lowest) id, read by block 0 (not bmax: a row
    int gbid;           //   with no candidate turns greedy while the others may still read bmax)
    u32 n;              // candidates in the compact list
};

// radix_search (sampling.cu) over the cluster's compact lists (ckey, cwm1: key and w - 1 of n candidates),
// `pass`: the running pass counter that picks the histogram buffer.
__device__ u64 radix_search_split(SplitShared &s, const u64 *ckey, const u32 *cwm1, int n, u64 kmin, bool count,
                                  int xmode, u64 xparam, int &pass) {
    u64 prefix = 0, base = 0, X = 0;
    const int tid = threadIdx.x, lane = tid & 31;
    for (int shift = 56; shift >= 0; shift -= 8) {
        const int b = pass & 1;
        pass++;
        u64 *hist = s.hist[b];
        u32 *nhist = s.nhist[b];
        if (tid < 256) {  // a bin a thread
            hist[tid] = 0;
            nhist[tid] = 0;
        }
        if (tid == 0) s.found[b] = 0;
        __syncthreads();
        for (int i0 = 0; i0 < n; i0 += SPLIT_THREADS) {  // the same trip count in every lane of a warp
            const int i = i0 + tid;
            int bin = -1;
            u64 v = 0;
            if (i < n) {
                const u64 key = ckey[i];
                if (key >= kmin && (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))) {
                    bin = (int)((key >> shift) & 255);
                    v = count ? 1ull : (u64)cwm1[i] + 1ull;
                }
            }
            if (__ballot_sync(0xffffffffu, bin >= 0) == 0u) continue;
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
        cluster_barrier();  // every block's histogram of this pass is complete
        if (tid < 256) {
            u64 t = 0;
            u32 nt = 0;
#pragma unroll
            for (u32 rk = 0; rk < SPLIT_C; rk++) {
                t += peer_u64(&hist[tid], rk);
                nt += peer_u32(&nhist[tid], rk);
            }
            s.tot[tid] = t;
            s.ntot[tid] = nt;
        }
        __syncthreads();
        if (tid < 32) select_digit(s.tot, s.ntot, shift, prefix, base, xmode, xparam, X, s.shared2);
        __syncthreads();
        prefix = s.shared2[0];
        base = s.shared2[1];
        const bool single = s.shared2[2] == 1ull, stop = s.shared2[3] != 0;
        __syncthreads();
        if (stop) return 0ull;
        if (single && shift > 0) {  // the one candidate (in one block's list) whose key agrees down to this digit
            for (int i = tid; i < n; i += SPLIT_THREADS) {
                const u64 key = ckey[i];
                if ((key >> shift) == (prefix >> shift) && key >= kmin) s.found[b] = key;
            }
            cluster_barrier();
            u64 key = 0;
#pragma unroll
            for (u32 rk = 0; rk < SPLIT_C; rk++) {
                const u64 k = peer_u64(&s.found[b], rk);
                key = k > key ? k : key;
            }
            return key;
        }
    }
    return prefix;
}

// Greedy over the cluster: argmax, lowest id on ties, NaN never wins (a total order: any grouping gives the
// same); block 0 writes *out. Every block of the cluster calls it (two cluster barriers).
__device__ __noinline__ void greedy_split(SplitShared &s, const float *l, const u32 *mb, int words, int lo, int hi, u32 rank,
                             int *out) {
    const int tid = threadIdx.x;
    float best;
    int bid;
    block_argmax<SPLIT_THREADS>(l, mb, words, lo, hi, s.fscratch, s.iscratch, best, bid);
    if (tid == 0) {
        s.gbest = best;
        s.gbid = bid;
    }
    cluster_barrier();
    if (rank == 0 && tid == 0) {
        for (u32 rk = 1; rk < SPLIT_C; rk++) {
            const float ov = __uint_as_float(peer_u32(&s.gbest, rk));
            argmax_take(best, bid, ov, (int)peer_u32(&s.gbid, rk));
        }
        *out = bid == 0x7fffffff ? 0 : bid;
    }
    cluster_barrier();  // the others' shared memory stays until block 0 has read it
}

// sample_rows' arguments and result; grid: SPLIT_C blocks a row (blockIdx.x / SPLIT_C), SPLIT_THREADS threads,
// dynamic shared memory split_smem(vocab) = S * 12 bytes (the compact list).
extern "C" __global__ void __cluster_dims__(SPLIT_C, 1, 1) __launch_bounds__(SPLIT_THREADS, 2)  // 2 blocks an SM
sample_rows_split(const float *__restrict__ logits, const int *__restrict__ rows, int vocab,
                  const float *__restrict__ temperature, const float *__restrict__ top_p,
                  const int *__restrict__ top_k, const u64 *__restrict__ seed, const u64 *__restrict__ step,
                  const float *__restrict__ min_p, const int *__restrict__ adj_row,
                  const float *__restrict__ adj_logits, int *__restrict__ out, const u32 *__restrict__ mask_bits,
                  const int *__restrict__ mask_row, int words) {
    pdl_wait();
    pdl_trigger();
    __shared__ SplitShared s;
    extern __shared__ u64 split_dyn[];
    const int S = (vocab + SPLIT_C - 1) / SPLIT_C;
    u64 *ckey = split_dyn;
    u32 *cwm1 = reinterpret_cast<u32 *>(split_dyn + S);
    const u32 rank = cluster_rank();
    const int r = blockIdx.x / SPLIT_C, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int lo = (int)rank * S, hi = min(lo + S, vocab);
    const int ar = adj_row[r];
    const float *l = ar >= 0 ? adj_logits + (size_t)ar * vocab : logits + (size_t)rows[r] * vocab;
    const int mr = mask_row != nullptr ? mask_row[r] : -1;
    const u32 *mb = mr >= 0 ? mask_bits + (size_t)mr * words : nullptr;
    const float temp = temperature[r];

    if (!(temp > 0.f)) {
        greedy_split(s, l, mb, words, lo, hi, rank, out + r);
        return;
    }

    const float inv_t = 1.0f / temp;
    float mx = -INFINITY;
#pragma unroll 8
    for (int i = lo + tid; i < hi; i += SPLIT_THREADS) mx = fmaxf(mx, __fmul_rn(logit_at(l, mb, words, i), inv_t));
    mx = warp_max(mx);
    if (lane == 0) s.fscratch[warp] = mx;
    if (tid == 0) s.n = 0;
    __syncthreads();
    if (tid == 0) {
        float bm = s.fscratch[0];
        for (int w = 1; w < SPLIT_THREADS / 32; w++) bm = fmaxf(bm, s.fscratch[w]);
        s.bmax = bm;
    }
    cluster_barrier();
    mx = s.bmax;
#pragma unroll
    for (u32 rk = 0; rk < SPLIT_C; rk++) mx = fmaxf(mx, __uint_as_float(peer_u32(&s.bmax, rk)));
    if (!isfinite(mx)) {  // no token weighs anything (+inf, all -inf or NaN, 1/t overflowed): greedy, as the spec
        greedy_split(s, l, mb, words, lo, hi, rank, out + r);   // (mx is the same in every block: the same path)
        return;
    }

    const float mp = min_p[r];
    const u64 wmin = mp > 0.f ? max(1ull, (u64)ceil((double)mp * 4294967296.0)) : 1ull;
    // compaction (warp-uniform trip counts): SPLIT_U logits a thread loaded before any is used
    for (int i0 = lo; i0 < hi; i0 += SPLIT_U * SPLIT_THREADS) {
        float lv[SPLIT_U];
#pragma unroll
        for (int u = 0; u < SPLIT_U; u++) {
            const int i = i0 + u * SPLIT_THREADS + tid;
            lv[u] = i < hi ? logit_at(l, mb, words, i) : 0.f;
        }
#pragma unroll
        for (int u = 0; u < SPLIT_U; u++) {
            const int i = i0 + u * SPLIT_THREADS + tid;
            const u64 w = i < hi ? weight_of(lv[u], inv_t, mx, wmin) : 0ull;
            const unsigned keep = __ballot_sync(0xffffffffu, w != 0);
            if (keep == 0u) continue;
            u32 at = 0;
            if (lane == 0) at = atomicAdd(&s.n, (u32)__popc(keep));
            at = __shfl_sync(0xffffffffu, at, 0);
            if (w != 0) {
                const u32 slot = at + (u32)__popc(keep & ((1u << lane) - 1u));
                ckey[slot] = order_key(lv[u], i);
                cwm1[slot] = (u32)(w - 1);  // w <= 2^32
            }
        }
    }
    __syncthreads();
    const int n = (int)s.n;

    int pass = 0;
    u64 kmin = 0;
    const int k = top_k[r];
    if (k > 0) kmin = radix_search_split(s, ckey, cwm1, n, 0, true, X_TOPK, (u64)(k - 1), pass);
    u64 kcut = kmin;
    const float p = top_p[r];
    if (p < 1.0f) {
        u64 p24 = (u64)ceil((double)p * 16777216.0);
        kcut = radix_search_split(s, ckey, cwm1, n, kmin, false, X_NUCLEUS, p24, pass);
    }
    u64 u24 = splitmix64(seed[r] ^ (step[r] * GOLDEN)) >> 40;
    u64 key = radix_search_split(s, ckey, cwm1, n, kcut, false, X_DRAW, u24, pass);
    if (rank == 0 && tid == 0) out[r] = (int)(0xFFFFFFFFu - (u32)(key & 0xFFFFFFFFull));
    cluster_barrier();  // the others' shared memory stays until every block has read it
}

#endif
