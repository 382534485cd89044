// The fused epilogues of the projections. linear.cu (gemv, mma.sync) calls epilogue_pair() with two adjacent
// output columns (n, n+1) of one row; linear_wgmma.cu calls epi8_fetch() / epi8_put() with eight (n .. n+7,
// n % 8 == 0), the same arithmetic per element with 32- / 16- / 8-byte accesses.
#pragma once
#include "common.cuh"
#include "rope.cu"
#include "kv_write.cu"
#include "swiglu.cu"

#define EPI_STORE 0   // out_f32[m, n] = y
#define EPI_ADD 1     // out_f32[m, n] += y (residual stream)
#define EPI_SWIGLU 2  // columns (2j, 2j+1) = (gate_j, up_j): out_bf16[m, j] = silu(gate) * up
#define EPI_QKV 3     // [q | k | v]: RoPE on q, k; q -> out_f32 [m, q_size]; k, v -> caches at slots[m]

struct Epi {
    float *out_f32;
    bf16 *out_bf16;
    const int *positions;
    const float2 *rope;
    const int *slots;
    bf16 *k_cache;
    bf16 *v_cache;
    int mode;
    int ld;
    int head_dim;
    int q_size;
    int kv_size;
    // The RMSNorm folded into the projections (linear_wgmma only; all null / 0 otherwise: launchers.epi):
    // EPI_ADD with norm_out: also norm_out[m, n] = bf16(r[m, n] * norm_w[n]) of the updated residual r, and
    // ss_out[m, n / 64] = sum of r[m, .]^2 over the 64 columns n / 64 ... (ss_groups = ld / 64 a row);
    // ss_in (any mode): the GEMM's output row m scaled by rstd = 1 / sqrt(sum_g ss_in[m, g] / (64 ss_groups)
    // + eps) before the epilogue, i.e. rmsnorm(r) @ W^T = rstd * ((r * w) @ W^T).
    const float *norm_w;
    bf16 *norm_out;
    float *ss_out;
    const float *ss_in;
    int ss_groups;
    float eps;
};

__device__ __forceinline__ void epilogue_pair(const Epi &e, int m, int n, float v0, float v1) {
    if (e.mode == EPI_STORE) {
        float *o = e.out_f32 + (size_t)m * e.ld + n;
        o[0] = v0;
        o[1] = v1;
    } else if (e.mode == EPI_ADD) {
        float *o = e.out_f32 + (size_t)m * e.ld + n;
        o[0] += v0;
        o[1] += v1;
    } else if (e.mode == EPI_SWIGLU) {
        e.out_bf16[(size_t)m * e.ld + (n >> 1)] = f2bf(silu_mul(v0, v1));
    } else {
        int qk = e.q_size + e.kv_size;
        if (n < qk) {
            int half = e.head_dim >> 1;
            rope_pair(v0, v1, e.rope[(size_t)e.positions[m] * half + ((n % e.head_dim) >> 1)]);
        }
        if (n < e.q_size) {
            float *o = e.out_f32 + (size_t)m * e.q_size + n;
            o[0] = v0;
            o[1] = v1;
        } else {
            int slot = e.slots[m];
            if (slot >= 0) {
                bf16 *cache = n < qk ? e.k_cache : e.v_cache;
                kv_store_pair(cache, slot, e.kv_size, (n - e.q_size) % e.kv_size, v0, v1);
            }
        }
    }
}

// ---- eight adjacent columns n .. n + 7 of row m (linear_wgmma.cu) ----
// Needs (checked on the host, kernels.cuda.wgmma_plan.epilogue_ok): n % 8 == 0; EPI_STORE / EPI_ADD: ld % 4 == 0
// and out_f32 16-byte aligned; EPI_SWIGLU: ld % 4 == 0, out_bf16 8-byte aligned; EPI_QKV: head_dim, q_size and
// kv_size multiples of 8 (a chunk never straddles a head, q / k / v or a rope pair), 16-byte aligned q out,
// caches and rope table. The caller issues every fetch of a group of chunks before their puts, so the
// global reads of a thread are in flight together.

__device__ __forceinline__ void load8(const float *p, float *x) {
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ u32 bf16x2_bits(bf16 lo, bf16 hi) {
    __nv_bfloat162 h = __halves2bfloat162(lo, hi);
    return *reinterpret_cast<const u32 *>(&h);
}
__device__ __forceinline__ void store8(float *p, const float *v) {
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// The chunk's global reads: EPI_ADD the residual (and, with norm_out, the norm weights into w); EPI_QKV (q and
// k columns) the four (cos, sin) pairs of its rope row `pos` (x[2 i], x[2 i + 1]: pair i). Nothing for
// EPI_STORE / EPI_SWIGLU.
template <int MODE>
__device__ __forceinline__ void epi8_fetch(const Epi &e, int m, int n, int pos, float *x, float *w) {
    if (MODE == EPI_ADD) {
        load8(e.out_f32 + (size_t)m * e.ld + n, x);
        if (e.norm_out) load8(e.norm_w + n, w);
    } else if (MODE == EPI_QKV) {
        if (n < e.q_size + e.kv_size)
            load8(reinterpret_cast<const float *>(e.rope + (size_t)pos * (e.head_dim >> 1) + ((n % e.head_dim) >> 1)),
                  x);
    }
}

// The chunk's values v (rotated in place for EPI_QKV) through the epilogue; x, w: what epi8_fetch read; slot:
// the row's KV slot (EPI_QKV; negative: no cache write); rstd: the row's norm scale (ss_in; else unused).
// Returns EPI_ADD's sum of squares of the chunk's updated residual (with norm_out), else 0.
template <int MODE>
__device__ __forceinline__ float epi8_put(const Epi &e, int m, int n, int slot, float *v, const float *x,
                                          const float *w, float rstd) {
    if (e.ss_in) {
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] *= rstd;
    }
    if (MODE == EPI_STORE) {
        store8(e.out_f32 + (size_t)m * e.ld + n, v);
    } else if (MODE == EPI_ADD) {
        float s[8], ss = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i++) s[i] = x[i] + v[i];
        store8(e.out_f32 + (size_t)m * e.ld + n, s);
        if (e.norm_out) {
            u32 h[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                h[i] = bf16x2_bits(f2bf(s[2 * i] * w[2 * i]), f2bf(s[2 * i + 1] * w[2 * i + 1]));
                ss += s[2 * i] * s[2 * i] + s[2 * i + 1] * s[2 * i + 1];
            }
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(e.norm_out + (size_t)m * e.ld + n),
                         "r"(h[0]), "r"(h[1]), "r"(h[2]), "r"(h[3])
                         : "memory");
        }
        return ss;
    } else if (MODE == EPI_SWIGLU) {
        u32 h[2];
#pragma unroll
        for (int i = 0; i < 2; i++)
            h[i] = bf16x2_bits(f2bf(silu_mul(v[4 * i], v[4 * i + 1])), f2bf(silu_mul(v[4 * i + 2], v[4 * i + 3])));
        *reinterpret_cast<uint2 *>(e.out_bf16 + (size_t)m * e.ld + (n >> 1)) = make_uint2(h[0], h[1]);
    } else {
        const int qk = e.q_size + e.kv_size;
        if (n < qk) {
#pragma unroll
            for (int i = 0; i < 4; i++) rope_pair(v[2 * i], v[2 * i + 1], make_float2(x[2 * i], x[2 * i + 1]));
        }
        if (n < e.q_size) {
            store8(e.out_f32 + (size_t)m * e.q_size + n, v);
        } else if (slot >= 0) {
            u32 h[4];   // (the rounding of kv_store_pair: __floats2bfloat162_rn == two f2bf)
#pragma unroll
            for (int i = 0; i < 4; i++) h[i] = bf16x2_bits(f2bf(v[2 * i]), f2bf(v[2 * i + 1]));
            bf16 *cache = n < qk ? e.k_cache : e.v_cache;
            // (inline PTX: NVVM split the uint4 store through a bf16 pointer into four 4-byte stores)
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(
                             cache + (size_t)slot * e.kv_size + (n < qk ? n - e.q_size : n - qk)),
                         "r"(h[0]), "r"(h[1]), "r"(h[2]), "r"(h[3])
                         : "memory");
        }
    }
    return 0.f;
}
