// mlp_lean_tT: mlp_fused (fused.cu) for exactly T rows, with a shorter chain after the wait; selected
// with the other lean kernels by AOTX_LEAN=1. Twin: kernels.cuda.fused_twins.mlp_fused_twin.
//
// Same work split, grid and grid barrier as mlp_fused (phase 1: gate/up + SwiGLU, row pairs over all
// warps; phase 2: down + residual, 2 column pairs a block, K split over 4 warps, fixed-order reduction).
// What changes:
//   * the row count has a template bound TM in {1, 2, 4, 8} (the launcher picks the smallest TM >= T;
//     rows T..TM-1 repeat row T - 1 and are never stored): the hot loops hold TM rows with no per-row
//     predicate (mlp_fused unrolls 8 with one each), so a T = 1 launch streams little code;
//   * the RMSNorm takes ONE __syncthreads instead of three: each thread stages x * norm_w for the
//     elements it loaded (norm_w prefetched before the wait) together with its warp's partial sums of
//     squares; every warp then reads the 8 partials of each row and applies rstd to its dot products.
#define FUSED_HELPERS_ONLY
#include "fused.cu"
#include "kv_write.cu"
#include "rope.cu"

__device__ __forceinline__ void cp_async16_cg(void *smem, const void *gmem) {
    unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem) : "memory");
}

// WITH_QKV (omlpq_lean_tT, AOTX_LEAN=3): after the MLP, a third grid barrier, then the NEXT layer's
// RMSNorm + QKV + RoPE + K/V write (qkv_lean's work: one column pair a warp, the activation rows read
// straight from L2; its weights are loaded while phase 2 runs, its positions, slots and RoPE rows before
// the wait): the next layer's qkv_lean launch is gone.
struct QkvNext {
    const bf16 *W;          // [N, H] = [q | k | v] rows of the next layer
    const float *norm_w;    // its attention norm
    const int *positions;   // host-staged
    const float2 *rope;
    const int *slots;       // host-staged
    float *q_out;
    bf16 *k_cache;          // the next layer's caches
    bf16 *v_cache;
    int N;
    int head_dim;
    int q_size;
    int kv_size;
};

#define O_CHUNKS 24  // phase 0 (omlp): 16-byte pieces of one row's K split, one per lane: KO <= 768

#define LM_V4 ((FUSED_MAX_K / 4 + FUSED_THREADS - 1) / FUSED_THREADS)  // float4 of one row per thread

// WITH_O (omlp_lean_tT, AOTX_LEAN=2): first the O projection + residual add of the combined attention
// attn bf16 [T, KO] (phase 0: the column pairs and K splits of phase 2, Wo [H, KO] by cp.async before
// the wait), then a grid barrier, then the MLP: one launch instead of o_lean + mlp_lean.
template <int TM, bool WITH_O, bool WITH_QKV>
__device__ __forceinline__ void mlp_lean_body(int T, float *residual, const float *__restrict__ norm_w, float eps,
                                              const bf16 *__restrict__ Wgu, const bf16 *__restrict__ Wd, bf16 *act,
                                              int H, int F, unsigned *bar, const bf16 *attn,
                                              const bf16 *__restrict__ Wo, int KO, const QkvNext &qn) {
    __shared__ __align__(16) float xs[TM * FUSED_MAX_K];
    __shared__ float ss_s[TM][FUSED_WARPS];
    __shared__ float red[FUSED_WARPS][TM][2];
    __shared__ __align__(16) uint4 dsm[FUSED_WARPS][2][MLP_K2_CHUNKS * 32];  // this warp's two down rows
    __shared__ __align__(16) uint4 osm[WITH_O ? FUSED_WARPS : 1][2][O_CHUNKS];  // and its two O rows
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int gw = blockIdx.x * FUSED_WARPS + warp, nw = gridDim.x * FUSED_WARPS;
    uint4 wg[MLP_P1_ITERS][K1_CHUNKS], wu[MLP_P1_ITERS][K1_CHUNKS];
#pragma unroll
    for (int i = 0; i < MLP_P1_ITERS; i++) {
        int j = gw + i * nw;
        load_rows(Wgu, 2 * j, H, j < F, wg[i], wu[i]);
    }
    const int pairs_per_block = FUSED_WARPS / MLP_KSPLIT;
    const int n0 = 2 * (blockIdx.x * pairs_per_block + warp / MLP_KSPLIT), s = warp % MLP_KSPLIT;
    const bool out_ok = n0 < H;
    const int kseg = F / MLP_KSPLIT, chunks2 = kseg >> 3;
    // phase 2's weights go to shared memory (cp.async, before the wait): registers stay for phase 1's
    {
        const uint4 *r0 = reinterpret_cast<const uint4 *>(Wd + (size_t)(out_ok ? n0 : 0) * F + s * kseg);
        const uint4 *r1 = reinterpret_cast<const uint4 *>(Wd + (size_t)(out_ok ? n0 + 1 : 0) * F + s * kseg);
#pragma unroll
        for (int i = 0; i < MLP_K2_CHUNKS; i++) {
            int c = lane + 32 * i;
            if (out_ok && c < chunks2) {
                cp_async16_cg(&dsm[warp][0][c], r0 + c);
                cp_async16_cg(&dsm[warp][1][c], r1 + c);
            }
        }
        if (WITH_O) {
            const int kseg0 = KO / MLP_KSPLIT;
            const uint4 *o0 = reinterpret_cast<const uint4 *>(Wo + (size_t)(out_ok ? n0 : 0) * KO + s * kseg0);
            const uint4 *o1 = reinterpret_cast<const uint4 *>(Wo + (size_t)(out_ok ? n0 + 1 : 0) * KO + s * kseg0);
            if (out_ok && lane < (kseg0 >> 3)) {
                cp_async16_cg(&osm[WITH_O ? warp : 0][0][lane], o0 + lane);
                cp_async16_cg(&osm[WITH_O ? warp : 0][1][lane], o1 + lane);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    }
    // the norm weights of the elements this thread stages (the same k4 for every row)
    const int k4n = H >> 2;
    float4 g[LM_V4];
#pragma unroll
    for (int i = 0; i < LM_V4; i++) {
        const int k4 = tid + i * FUSED_THREADS;
        g[i] = k4 < k4n ? __ldg(reinterpret_cast<const float4 *>(norm_w) + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const int nq0 = 2 * gw;  // WITH_QKV: this warp's column pair of the next layer's QKV
    const bool q_on = WITH_QKV && nq0 < qn.N;
    // (WITH_QKV) the next layer's constants are loaded early so their latency hides (before the wait, and
    // its rows while phase 2 runs) where the registers allow
    constexpr bool Q_EARLY = TM <= 4;
    int q_slot = -1;
    float2 q_cs = make_float2(1.f, 0.f);
    auto q_consts = [&]() {
        if (q_on && lane < T) {
            q_slot = qn.slots[lane];
            if (nq0 < qn.q_size + qn.kv_size)
                q_cs = qn.rope[(size_t)qn.positions[lane] * (qn.head_dim >> 1) + ((nq0 % qn.head_dim) >> 1)];
        }
    };
    if (WITH_QKV && Q_EARLY) q_consts();
    pdl_wait();
    // the next kernel may launch now: it can only once EVERY block of this grid has passed this point, so
    // all of them are resident (the grid barriers cannot starve), and it reads only constants before its
    // own wait; its weight loads then overlap all of this kernel's phases, not only the last
    pdl_trigger();
    const bool adds = out_ok && s == 0 && lane < T;
    float r0 = 0.f, r1 = 0.f;
    if (adds) {
        r0 = __ldcg(residual + (size_t)lane * H + n0);
        r1 = __ldcg(residual + (size_t)lane * H + n0 + 1);
    }
    if (WITH_O) {  // phase 0: residual[:, n0 .. n0+1] += attn @ Wo^T (K split over the 4 warps of a pair)
        const int kseg0 = KO / MLP_KSPLIT, c = lane;
        const bool on = out_ok && c < (kseg0 >> 3);
        uint4 xo[TM];
#pragma unroll
        for (int t = 0; t < TM; t++)
            xo[t] = on ? __ldcg(reinterpret_cast<const uint4 *>(attn + (size_t)min(t, T - 1) * KO + s * kseg0) + c)
                       : make_uint4(0, 0, 0, 0);
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // (each lane reads only what it copied)
        float o0[TM], o1[TM];
#pragma unroll
        for (int t = 0; t < TM; t++) o0[t] = o1[t] = 0.f;
        if (on) {
            float wa[8], wb[8];
            unpack8(osm[WITH_O ? warp : 0][0][c], wa);
            unpack8(osm[WITH_O ? warp : 0][1][c], wb);
#pragma unroll
            for (int t = 0; t < TM; t++) {
                float xf[8];
                unpack8(xo[t], xf);
                const float4 p = make_float4(xf[0], xf[1], xf[2], xf[3]), q = make_float4(xf[4], xf[5], xf[6], xf[7]);
                o0[t] += dot8(wa, p, q);
                o1[t] += dot8(wb, p, q);
            }
        }
#pragma unroll
        for (int t = 0; t < TM; t++) pair_partial(red[warp][t], lane, o0[t], o1[t]);
        __syncthreads();
        if (adds) {  // fixed order over the K splits; r0, r1 now hold the new residual for phase 2
#pragma unroll
            for (int q = 0; q < MLP_KSPLIT; q++) {
                r0 += red[warp + q][lane][0];
                r1 += red[warp + q][lane][1];
            }
            float *o = residual + (size_t)lane * H + n0;
            o[0] = r0;
            o[1] = r1;
        }
        grid_barrier(bar);  // phase 1 reads every column of the new residual
    }
    {
        float4 v[TM][LM_V4];
#pragma unroll
        for (int t = 0; t < TM; t++)  // (rows >= T repeat row T - 1: never stored)
#pragma unroll
            for (int i = 0; i < LM_V4; i++) {
                const int k4 = tid + i * FUSED_THREADS;
                v[t][i] = k4 < k4n ? __ldcg(reinterpret_cast<const float4 *>(residual + (size_t)min(t, T - 1) * H) + k4)
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
        for (int t = 0; t < TM; t++) {
            float ss = 0.f;
#pragma unroll
            for (int i = 0; i < LM_V4; i++) {
                const int k4 = tid + i * FUSED_THREADS;
                const float4 a = v[t][i];
                ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
                if (k4 < k4n)
                    reinterpret_cast<float4 *>(xs + t * H)[k4] =
                        make_float4(a.x * g[i].x, a.y * g[i].y, a.z * g[i].z, a.w * g[i].w);
            }
            ss = warp_sum(ss);
            if (lane == 0) ss_s[t][warp] = ss;
        }
    }
    __syncthreads();
    float rstd[TM];
#pragma unroll
    for (int t = 0; t < TM; t++) {
        float tot = 0.f;
#pragma unroll
        for (int w = 0; w < FUSED_WARPS; w++) tot += ss_s[t][w];
        rstd[t] = 1.f / sqrtf(tot / (float)H + eps);
    }
    const int chunks = H >> 3;
#pragma unroll
    for (int it = 0; it < MLP_P1_ITERS; it++) {
        const int j = gw + it * nw;
        if (j < F) {
            float acc0[TM], acc1[TM];
#pragma unroll
            for (int t = 0; t < TM; t++) acc0[t] = acc1[t] = 0.f;
#pragma unroll
            for (int i = 0; i < K1_CHUNKS; i++) {
                const int c = lane + 32 * i;
                if (c < chunks) {
                    float a[8], b[8];
                    unpack8(wg[it][i], a);
                    unpack8(wu[it][i], b);
#pragma unroll
                    for (int t = 0; t < TM; t++) {
                        const float4 *xr = reinterpret_cast<const float4 *>(xs + t * H + c * 8);
                        const float4 p = xr[0], q = xr[1];
                        acc0[t] += dot8(a, p, q);
                        acc1[t] += dot8(b, p, q);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < TM; t++) {
                const float gv = warp_sum(acc0[t]) * rstd[t], uv = warp_sum(acc1[t]) * rstd[t];
                if (lane == t && t < T) act[(size_t)t * F + j] = f2bf(silu_mul(gv, uv));
            }
        }
    }
    uint4 qa[K1_CHUNKS], qb[K1_CHUNKS];
    if (WITH_QKV && Q_EARLY) load_rows(qn.W, nq0, H, q_on, qa, qb);
    grid_barrier(bar);
    float a0[TM], a1[TM];
#pragma unroll
    for (int t = 0; t < TM; t++) a0[t] = a1[t] = 0.f;
    if (out_ok) {
        uint4 xa[TM][MLP_K2_CHUNKS];
#pragma unroll
        for (int t = 0; t < TM; t++)
#pragma unroll
            for (int i = 0; i < MLP_K2_CHUNKS; i++) {
                const int c = lane + 32 * i, tt = min(t, T - 1);
                xa[t][i] = c < chunks2 ? __ldcg(reinterpret_cast<const uint4 *>(act + (size_t)tt * F + s * kseg) + c)
                                       : make_uint4(0, 0, 0, 0);
            }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // (each lane reads only what it copied)
#pragma unroll
        for (int i = 0; i < MLP_K2_CHUNKS; i++) {
            if (lane + 32 * i < chunks2) {
                float wa[8], wb[8];
                unpack8(dsm[warp][0][lane + 32 * i], wa);
                unpack8(dsm[warp][1][lane + 32 * i], wb);
#pragma unroll
                for (int t = 0; t < TM; t++) {
                    float xf[8];
                    unpack8(xa[t][i], xf);
                    const float4 p = make_float4(xf[0], xf[1], xf[2], xf[3]), q = make_float4(xf[4], xf[5], xf[6], xf[7]);
                    a0[t] += dot8(wa, p, q);
                    a1[t] += dot8(wb, p, q);
                }
            }
        }
#pragma unroll
        for (int t = 0; t < TM; t++) pair_partial(red[warp][t], lane, a0[t], a1[t]);
    }
    __syncthreads();
    if (adds) {  // fixed order over the K splits: deterministic
        float y0 = 0.f, y1 = 0.f;
#pragma unroll
        for (int q = 0; q < MLP_KSPLIT; q++) {
            y0 += red[warp + q][lane][0];
            y1 += red[warp + q][lane][1];
        }
        float *o = residual + (size_t)lane * H + n0;
        o[0] = r0 + y0;
        o[1] = r1 + y1;
    }
    if (!WITH_QKV) return;
    grid_barrier(bar);  // phase 3 reads every column of the new residual
    if (!q_on) return;
    if (!Q_EARLY) {
        load_rows(qn.W, nq0, H, q_on, qa, qb);
        q_consts();
    }
    const int chunks1 = H >> 3;
    float4 gp[K1_CHUNKS], gq[K1_CHUNKS];
#pragma unroll
    for (int i = 0; i < K1_CHUNKS; i++) {
        const int c = lane + 32 * i;
        gp[i] = gq[i] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c < chunks1) {
            gp[i] = __ldg(reinterpret_cast<const float4 *>(qn.norm_w) + 2 * c);
            gq[i] = __ldg(reinterpret_cast<const float4 *>(qn.norm_w) + 2 * c + 1);
        }
    }
    float qs0 = 0.f, qs1 = 0.f, qss = 0.f;  // lane t keeps row t's sums
#pragma unroll
    for (int t = 0; t < TM; t++) {  // (rows >= T repeat row T - 1: never stored)
        const float4 *xr = reinterpret_cast<const float4 *>(residual + (size_t)min(t, T - 1) * H);
        float ss = 0.f, c0 = 0.f, c1 = 0.f;
#pragma unroll
        for (int i = 0; i < K1_CHUNKS; i++) {
            const int c = lane + 32 * i;
            if (c < chunks1) {
                const float4 p = __ldcg(xr + 2 * c), q = __ldcg(xr + 2 * c + 1);
                ss += p.x * p.x + p.y * p.y + p.z * p.z + p.w * p.w + q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
                const float4 pn = make_float4(p.x * gp[i].x, p.y * gp[i].y, p.z * gp[i].z, p.w * gp[i].w);
                const float4 qn4 = make_float4(q.x * gq[i].x, q.y * gq[i].y, q.z * gq[i].z, q.w * gq[i].w);
                float a[8], b[8];
                unpack8(qa[i], a);
                unpack8(qb[i], b);
                c0 += dot8(a, pn, qn4);
                c1 += dot8(b, pn, qn4);
            }
        }
        ss = warp_sum(ss);
        c0 = warp_sum(c0);
        c1 = warp_sum(c1);
        if (lane == t) {
            qss = ss;
            qs0 = c0;
            qs1 = c1;
        }
    }
    if (lane >= T) return;
    const float q_rstd = 1.f / sqrtf(qss / (float)H + eps);  // (one eps for every norm of the model)
    float v0 = qs0 * q_rstd, v1 = qs1 * q_rstd;
    const int qk = qn.q_size + qn.kv_size;
    if (nq0 < qk) rope_pair(v0, v1, q_cs);
    if (nq0 < qn.q_size) {
        float *o = qn.q_out + (size_t)lane * qn.q_size + nq0;
        o[0] = v0;
        o[1] = v1;
    } else if (q_slot >= 0) {
        kv_store_pair(nq0 < qk ? qn.k_cache : qn.v_cache, q_slot, qn.kv_size, (nq0 - qn.q_size) % qn.kv_size, v0, v1);
    }
}

#define MLP_LEAN(TM)                                                                                             \
    extern "C" __global__ void __launch_bounds__(FUSED_THREADS, 2) mlp_lean_t##TM(                              \
        int T, float *residual, const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ Wgu,              \
        const bf16 *__restrict__ Wd, bf16 *act, int H, int F, unsigned *bar) {                                   \
        mlp_lean_body<TM, false, false>(T, residual, norm_w, eps, Wgu, Wd, act, H, F, bar, nullptr, nullptr, 0,     \
                                        QkvNext{});                                                              \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(FUSED_THREADS, 2) omlp_lean_t##TM(                             \
        int T, float *residual, const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ Wgu,              \
        const bf16 *__restrict__ Wd, bf16 *act, int H, int F, unsigned *bar, const bf16 *attn,                   \
        const bf16 *__restrict__ Wo, int KO) {                                                                   \
        mlp_lean_body<TM, true, false>(T, residual, norm_w, eps, Wgu, Wd, act, H, F, bar, attn, Wo, KO, QkvNext{});  \
    }

// (omlpq up to 4 rows: at 8 the register budget would spill; AOTX_LEAN=3 runs T > 4 as AOTX_LEAN=2)
#define OMLPQ_LEAN(TM)                                                                                           \
    extern "C" __global__ void __launch_bounds__(FUSED_THREADS, 2) omlpq_lean_t##TM(                             \
        int T, float *residual, const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ Wgu,              \
        const bf16 *__restrict__ Wd, bf16 *act, int H, int F, unsigned *bar, const bf16 *attn,                   \
        const bf16 *__restrict__ Wo, int KO, QkvNext qn) {                                                       \
        mlp_lean_body<TM, true, true>(T, residual, norm_w, eps, Wgu, Wd, act, H, F, bar, attn, Wo, KO, qn);          \
    }

MLP_LEAN(1)
MLP_LEAN(2)
MLP_LEAN(4)
MLP_LEAN(8)
OMLPQ_LEAN(1)
OMLPQ_LEAN(2)
OMLPQ_LEAN(4)
