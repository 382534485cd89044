// bf16 projections y = x @ W^T on Hopper warpgroup MMA (wgmma.mma_async, sm_90a): the T >= 64 path of
// linear.cu's linear_mma, with the same arguments and the same fused epilogues (epilogue.cuh).
// A bf16 [M, K] row-major, W bf16 [N, K] row-major (both K-major: wgmma's native, untransposed form),
// float32 accumulate. K % 64 == 0, N % 8 == 0; M and N need not be tile multiples (zero-filled rows,
// unwritten columns). Twin: numpy `x @ w.T` + kernels.cuda.twins' epilogues; its index logic (swizzle,
// descriptors, fragment) is emulated in kernels/cuda/wgmma_twin.py.
//
// Block: WG warpgroups (128 threads each) own BM = 64 WG rows by BN columns; warpgroup g computes rows
// 64 g .. 64 g + 63 against all BN columns (one m64nBNk16 wgmma per 16 of K). Every thread loads the
// tiles with cp.async into STAGES shared buffers of [A: BM x 128 B | B: BN x 128 B] in the 128-byte
// swizzled K-major layout (wgmma.cuh), STAGES - 2 k-tiles ahead (the _tma_ variants: the TMA unit copies
// them, the same layout, landing signalled on an mbarrier a stage); one wgmma group stays in flight while
// the next is issued. Grid (ceil(M / BM), ceil(N / BN)): the M tiles of one weight tile run side by
// side, so each weight tile comes from DRAM once.
#include "common.cuh"
#include "epilogue.cuh"
#include "mma.cuh"
#include "wgmma.cuh"

#define WG_BK 64
#define WG_OUT_PAD 4   // floats of padding per row of the output tile staged in shared memory
#define WG_EPI_GROUP 4 // chunks of eight columns a thread has in flight at once in the epilogue

// The output tile (float32 [BM, BN + WG_OUT_PAD] in shared memory) through epilogue MODE: thread q takes
// chunk q, q + THREADS, ... of eight columns (chunk i: row i / (BN / 8), columns 8 (i % (BN / 8)) ..), so a
// warp covers whole 32-byte sectors of consecutive rows; U chunks at a time, every global read of the U
// (epi8_fetch: residual, rope) issued before the first store. rows: the tile rows' positions, then slots.
template <int MODE, int BM, int BN, int THREADS>
__device__ __forceinline__ void wgmma_epilogue(const float *tile, const int *rows, const Epi &e, int m0, int n0,
                                               int M, int N) {
    constexpr int CPR = BN / 8, PER = BM * CPR / THREADS, U = PER < WG_EPI_GROUP ? PER : WG_EPI_GROUP;
    static_assert(PER * THREADS == BM * CPR && PER % U == 0, "chunks split evenly over threads and groups");
    static_assert(CPR % 8 == 0 && THREADS % 32 == 0, "eight consecutive lanes hold one row's 64 columns");
    const float *rstd = reinterpret_cast<const float *>(rows + 2 * BM);
#pragma unroll 1
    for (int i0 = 0; i0 < PER; i0 += U) {
        float v[U][8], x[U][8], w[U][8];
        int row[U], col[U];
        bool ok[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int q = threadIdx.x + (i0 + u) * THREADS;
            row[u] = q / CPR;
            col[u] = (q % CPR) * 8;
            ok[u] = m0 + row[u] < M && n0 + col[u] < N;   // N % 8 == 0: a chunk is all in or all out
            load8(tile + row[u] * (BN + WG_OUT_PAD) + col[u], v[u]);
            if (ok[u]) epi8_fetch<MODE>(e, m0 + row[u], n0 + col[u], rows[row[u]], x[u], w[u]);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            float ss = 0.f;
            if (ok[u])
                ss = epi8_put<MODE>(e, m0 + row[u], n0 + col[u], rows[BM + row[u]], v[u], x[u], w[u], rstd[row[u]]);
            if (MODE == EPI_ADD && e.norm_out) {   // (warp-uniform) the 64-column group's sum: its 8 lanes
#pragma unroll
                for (int o = 1; o < 8; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
                if (ok[u] && (col[u] & 63) == 0)
                    e.ss_out[(size_t)(m0 + row[u]) * e.ss_groups + ((n0 + col[u]) >> 6)] = ss;
            }
        }
    }
}

// TMA = false: every thread copies its 16-byte chunks with cp.async (A, W used). TMA = true: thread 0 has
// the TMA unit copy each stage's two boxes (amap, wmap used) and every thread waits on the stage's
// mbarrier; the same ring, the same barrier that frees a buffer.
template <int WG, int BN, int STAGES, bool TMA>
__device__ __forceinline__ void wgmma_tile(const bf16 *__restrict__ A, int M, const bf16 *__restrict__ W, int N,
                                           int K, const Epi &e, const TmaMap *amap, const TmaMap *wmap) {
    constexpr int BM = 64 * WG, THREADS = 128 * WG;
    constexpr u32 A_BYTES = BM * WG_SWIZZLE_ROW_BYTES, STAGE_BYTES = (BM + BN) * WG_SWIZZLE_ROW_BYTES;
    static_assert(STAGES >= 3, "one k-tile in flight on the tensor cores, one landing, one loading");
    static_assert((BN * 8) % THREADS == 0, "the B tile's 16-byte chunks split evenly over the threads");
    extern __shared__ __align__(1024) unsigned char wg_smem[];   // STAGES tiles, then STAGES mbarriers (TMA)
    u32 base = (u32)__cvta_generic_to_shared(wg_smem);
    const u32 pad = ((base + 1023u) & ~1023u) - base;   // 1024-byte aligned tiles (the swizzle atom)
    unsigned char *smem = wg_smem + pad;
    base += pad;
    const int tid = threadIdx.x, wg = tid >> 7;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int ktiles = K / WG_BK;
    const u32 bars = base + STAGES * STAGE_BYTES;   // mbarrier of stage s at bars + 8 s (TMA only)
    if (TMA && tid == 0) {
        for (int s = 0; s < STAGES; s++) mbar_init(bars + 8 * s, 1);
        mbar_init_fence();
    }
    if (TMA) __syncthreads();

    auto load = [&](int kt) {
        if (TMA) {
            if (tid == 0 && kt < ktiles) {
                const u32 sa = base + (kt % STAGES) * STAGE_BYTES, bar = bars + 8 * (kt % STAGES);
                mbar_arrive_expect_tx(bar, STAGE_BYTES);
                tma_load_2d(sa, amap, kt * WG_BK, m0, bar);
                tma_load_2d(sa + A_BYTES, wmap, kt * WG_BK, n0, bar);
            }
            return;
        }
        if (kt < ktiles) {
            unsigned char *sa = smem + (kt % STAGES) * STAGE_BYTES;
            unsigned char *sb = sa + A_BYTES;
            const int k0 = kt * WG_BK;
#pragma unroll
            for (int i = 0; i < BM * 8 / THREADS; i++) {   // 16-byte chunk q: row q / 8, chunk q % 8
                int q = tid + i * THREADS, row = q >> 3, ch = q & 7, gm = m0 + row;
                bool ok = gm < M;
                cp_async16(sa + sw128_offset(row, ch), A + (size_t)(ok ? gm : 0) * K + k0 + ch * 8, ok ? 16 : 0);
            }
#pragma unroll
            for (int i = 0; i < BN * 8 / THREADS; i++) {
                int q = tid + i * THREADS, row = q >> 3, ch = q & 7, gn = n0 + row;
                bool ok = gn < N;
                cp_async16(sb + sw128_offset(row, ch), W + (size_t)(ok ? gn : 0) * K + k0 + ch * 8, ok ? 16 : 0);
            }
        }
        cp_async_commit();   // (an empty group past the last k-tile keeps the wait count uniform)
    };

    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.f;

    pdl_wait();   // activations are the previous kernel's output
    pdl_trigger();
    // EPI_QKV: this block's rows' positions and KV slots, read now and parked in registers (thread r: row
    // m0 + r) until the epilogue, so their latency hides behind the main loop
    int row_pos = 0, row_slot = -1;
    if (e.mode == EPI_QKV && tid < BM && m0 + tid < M) {
        row_pos = e.positions[m0 + tid];
        row_slot = e.slots[m0 + tid];
    }
    // ss_in: the row's RMSNorm scale from its partial sums of squares (the previous EPI_ADD's ss_out)
    float row_rstd = 1.f;
    if (e.ss_in && tid < BM && m0 + tid < M) {
        float sum = 0.f;
        for (int g = 0; g < e.ss_groups; g++) sum += e.ss_in[(size_t)(m0 + tid) * e.ss_groups + g];
        row_rstd = 1.f / sqrtf(sum / (float)(64 * e.ss_groups) + e.eps);
    }
#pragma unroll
    for (int s = 0; s < STAGES - 2; s++) load(s);
    for (int kt = 0; kt < ktiles; kt++) {
        if (TMA) {
            mbar_wait(bars + 8 * (kt % STAGES), (kt / STAGES) & 1);   // k-tile kt landed (its use kt / STAGES)
        } else {
            cp_async_wait<STAGES - 3>();   // this thread's chunks of k-tile kt have landed
            fence_proxy_async();           // ... and are visible to the tensor cores' (async proxy) reads
        }
        __syncthreads();               // every thread's; also: all warpgroups finished k-tile kt - 2
        const u32 sa = base + (kt % STAGES) * STAGE_BYTES + wg * 64 * WG_SWIZZLE_ROW_BYTES;
        const u32 sb = base + (kt % STAGES) * STAGE_BYTES + A_BYTES;
        wgmma_fence_operand<BN / 2>(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++) wgmma_m64k16<BN>(d, wgmma_desc(sa + 32 * kk), wgmma_desc(sb + 32 * kk));
        wgmma_commit();
        wgmma_fence_operand<BN / 2>(d);
        wgmma_wait<1>();               // k-tile kt - 1 done: its buffer may be refilled after the next barrier
        load(kt + STAGES - 2);         // into k-tile kt - 2's buffer, free since the barrier above
    }
    wgmma_wait<0>();
    wgmma_fence_operand<BN / 2>(d);   // the epilogue's reads of d stay after the wait

    // Epilogue through shared memory (the stage buffers are free: every wgmma has completed and every
    // TMA copy was waited for): the fragments to a [BM, BN + WG_OUT_PAD] float32 tile (then the rows'
    // positions and KV slots, for EPI_QKV, and norm scales, for ss_in), then wgmma_epilogue<mode> in chunks of
    // eight columns.
    static_assert(BM * (BN + WG_OUT_PAD) * 4 + 3 * BM * 4 <= STAGES * STAGE_BYTES,
                  "the output tile and the rows' positions / slots / norm scales fit the stage buffers");
    __syncthreads();   // every warpgroup is done reading the stage buffers
    float *tile = reinterpret_cast<float *>(smem);
    int *rows = reinterpret_cast<int *>(tile + BM * (BN + WG_OUT_PAD));   // [BM] positions, slots, rstd (float)
    const int t = tid & 127, warp = t >> 5, lane = t & 31, g = lane >> 2, c = lane & 3;
    const int r0 = wg * 64 + warp * 16 + g;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
#pragma unroll
        for (int h = 0; h < 2; h++)
            *reinterpret_cast<float2 *>(tile + (r0 + 8 * h) * (BN + WG_OUT_PAD) + 8 * j + 2 * c) =
                make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
    if (tid < BM) {
        rows[tid] = row_pos;
        rows[BM + tid] = row_slot;
        reinterpret_cast<float *>(rows)[2 * BM + tid] = row_rstd;
    }
    __syncthreads();
    switch (e.mode) {
    case EPI_STORE: wgmma_epilogue<EPI_STORE, BM, BN, THREADS>(tile, rows, e, m0, n0, M, N); break;
    case EPI_ADD: wgmma_epilogue<EPI_ADD, BM, BN, THREADS>(tile, rows, e, m0, n0, M, N); break;
    case EPI_SWIGLU: wgmma_epilogue<EPI_SWIGLU, BM, BN, THREADS>(tile, rows, e, m0, n0, M, N); break;
    default: wgmma_epilogue<EPI_QKV, BM, BN, THREADS>(tile, rows, e, m0, n0, M, N); break;
    }
}

// Variants (kernels/cuda/wgmma_plan.py VARIANTS holds the same (BM, BN, STAGES) and picks one per shape).
#define WG_VARIANT(BM, BN, STAGES)                                                                              \
    extern "C" __global__ void __launch_bounds__(2 * BM, 1)                                                    \
        linear_wgmma_##BM##x##BN(const bf16 *__restrict__ A, int M, const bf16 *__restrict__ W, int N, int K,  \
                                 Epi e) {                                                                      \
        wgmma_tile<BM / 64, BN, STAGES, false>(A, M, W, N, K, e, nullptr, nullptr);                            \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(2 * BM, 1)                                                    \
        linear_wgmma_tma_##BM##x##BN(const __grid_constant__ TmaMap amap, const __grid_constant__ TmaMap wmap, \
                                     int M, int N, int K, Epi e) {                                             \
        wgmma_tile<BM / 64, BN, STAGES, true>(nullptr, M, nullptr, N, K, e, &amap, &wmap);                     \
    }

WG_VARIANT(64, 64, 5)
WG_VARIANT(64, 128, 4)
WG_VARIANT(128, 128, 4)
WG_VARIANT(128, 256, 4)
