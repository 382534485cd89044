// bf16 projections y = x @ W^T with W bf16 [N, K] row-major (the nn.Linear layout), float32 accumulate.
// Twin: numpy `x @ w_t` (kernels.model), with the fused epilogues' twins in kernels.cuda.twins.
//
//   linear_gemv: memory-bound path for T <= GEMV_MAX_T rows. One warp computes an adjacent pair of
//                output columns for every row; x is staged in shared memory as float32, optionally
//                through an RMSNorm prologue (x = the float32 residual, gathered by x_rows).
//   linear_mma:  tensor-core path (mma.sync m16n8k16 bf16, ldmatrix fragments, cp.async double
//                buffering); 64x64 tiles, or 32x32 (linear_mma_32) when 64x64 would not fill the GPU.
//
// Both end in epilogue_pair(), which receives the two adjacent columns (n, n+1) of one row, so the
// pairwise epilogues fuse: RoPE + paged KV write after QKV, silu*mul after the interleaved gate/up,
// the residual add after the O and down projections.
#include "common.cuh"
#include "epilogue.cuh"
#include "mma.cuh"

#define GEMV_MAX_T 8
#define GEMV_WARPS 4
#define GEMV_MAX_CHUNKS 6  // K <= 6 * 32 * 8 = 1536 (the model's largest input)

extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32)
linear_gemv(const void *__restrict__ x, int x_is_f32, const int *__restrict__ x_rows,
            const float *__restrict__ norm_w, float eps, const bf16 *__restrict__ W, int N, int K,
            int T, Epi e) {
    extern __shared__ float4 smem4[];
    float *xs = reinterpret_cast<float *>(smem4);  // [T, K]
    __shared__ float ssq[GEMV_MAX_T][GEMV_WARPS];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // The weights are constants: fetch this warp's two rows into registers before waiting for the
    // previous kernel, so their DRAM latency overlaps its tail (and x's staging below).
    const int n0 = (blockIdx.x * GEMV_WARPS + warp) * 2;
    const bool active = n0 < N;
    const int chunks = K >> 3;
    uint4 wa[GEMV_MAX_CHUNKS], wb[GEMV_MAX_CHUNKS];
    const uint4 *w0 = reinterpret_cast<const uint4 *>(W + (size_t)(active ? n0 : 0) * K);
    const uint4 *w1 = reinterpret_cast<const uint4 *>(W + (size_t)(active ? n0 + 1 : 0) * K);
#pragma unroll
    for (int i = 0; i < GEMV_MAX_CHUNKS; i++) {
        int c = lane + 32 * i;
        if (active && c < chunks) {
            wa[i] = w0[c];
            wb[i] = w1[c];
        }
    }
    pdl_wait();
    pdl_trigger();
    for (int t = 0; t < T; t++) {  // stage x; the sums of squares for the norm come along
        size_t src = (size_t)(x_rows ? x_rows[t] : t) * K;
        float ss = 0.f;
#pragma unroll 4
        for (int k = tid; k < K; k += blockDim.x) {  // (unrolled: several loads in flight at once)
            float v = x_is_f32 ? reinterpret_cast<const float *>(x)[src + k]
                               : bf2f(reinterpret_cast<const bf16 *>(x)[src + k]);
            xs[t * K + k] = v;
            ss += v * v;
        }
        if (norm_w) {
            ss = warp_sum(ss);
            if (lane == 0) ssq[t][warp] = ss;
        }
    }
    __syncthreads();
    if (norm_w) {  // each thread rescales the elements it staged
        for (int t = 0; t < T; t++) {
            float tot = 0.f;
#pragma unroll
            for (int w = 0; w < GEMV_WARPS; w++) tot += ssq[t][w];
            float rstd = 1.f / sqrtf(tot / (float)K + eps);
            for (int k = tid; k < K; k += blockDim.x) xs[t * K + k] = xs[t * K + k] * rstd * norm_w[k];
        }
        __syncthreads();
    }
    if (!active) return;
    float acc0[GEMV_MAX_T], acc1[GEMV_MAX_T];
#pragma unroll
    for (int t = 0; t < GEMV_MAX_T; t++) acc0[t] = acc1[t] = 0.f;
#pragma unroll
    for (int i = 0; i < GEMV_MAX_CHUNKS; i++) {
        int c = lane + 32 * i;
        if (c < chunks) {
            float a[8], b[8];
            unpack8(wa[i], a);
            unpack8(wb[i], b);
#pragma unroll
            for (int t = 0; t < GEMV_MAX_T; t++) {
                if (t < T) {
                    const float4 *xr = reinterpret_cast<const float4 *>(xs + t * K + c * 8);
                    float4 p = xr[0], q = xr[1];
                    acc0[t] += a[0] * p.x + a[1] * p.y + a[2] * p.z + a[3] * p.w + a[4] * q.x + a[5] * q.y + a[6] * q.z + a[7] * q.w;
                    acc1[t] += b[0] * p.x + b[1] * p.y + b[2] * p.z + b[3] * p.w + b[4] * q.x + b[5] * q.y + b[6] * q.z + b[7] * q.w;
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < GEMV_MAX_T; t++) {
        if (t < T) {
            float s0 = warp_sum(acc0[t]), s1 = warp_sum(acc1[t]);
            if (lane == 0) epilogue_pair(e, t, n0, s0, s1);
        }
    }
}

#define BK 32
#define SROW (BK + 8)  // padded shared row (80 bytes): conflict-free ldmatrix

// A bf16 [M, K] row-major; W bf16 [N, K]; K % 32 == 0, N % BN == 0. 4 warps in 2 x 2, each warp
// MT x NT tiles of m16n8: block tile BM = 32 MT rows by BN = 16 NT columns. Grid (N/BN, ceil(M/BM)).
template <int MT, int NT>
__device__ __forceinline__ void mma_tile(const bf16 *__restrict__ A, int M, const bf16 *__restrict__ W, int N,
                                         int K, const Epi &e) {
    constexpr int BM = 32 * MT, BN = 16 * NT;
    __shared__ __align__(16) bf16 As[2][BM * SROW];
    __shared__ __align__(16) bf16 Ws[2][BN * SROW];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int g = lane >> 2, c = lane & 3;
    int wm = (warp >> 1) * 16 * MT, wn = (warp & 1) * 8 * NT;
    int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    auto load = [&](int stage, int k0) {
#pragma unroll
        for (int i = 0; i < BM * 4 / 128; i++) {
            int chunk = tid + i * 128, row = chunk >> 2, col = (chunk & 3) * 8;
            int gm = m0 + row;
            bool ok = gm < M;
            cp_async16(&As[stage][row * SROW + col], A + (size_t)(ok ? gm : 0) * K + k0 + col, ok ? 16 : 0);
        }
#pragma unroll
        for (int i = 0; i < BN * 4 / 128; i++) {
            int chunk = tid + i * 128, row = chunk >> 2, col = (chunk & 3) * 8;
            int gn = n0 + row;
            bool ok = gn < N;
            cp_async16(&Ws[stage][row * SROW + col], W + (size_t)(ok ? gn : 0) * K + k0 + col, ok ? 16 : 0);
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;

    int ktiles = K / BK;
    pdl_wait();  // (cp.async of activations must not start before the producer finished)
    pdl_trigger();
    load(0, 0);
    for (int kt = 0; kt < ktiles; kt++) {
        int s = kt & 1;
        if (kt + 1 < ktiles) {
            load(s ^ 1, (kt + 1) * BK);
            asm volatile("cp.async.wait_group 1;\n" ::);
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::);
        }
        __syncthreads();
        const bf16 *as = As[s];
        const bf16 *ws = Ws[s];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            u32 a[MT][4], b[NT][2];
            // ldmatrix.x4: lanes 0-15 address rows 0-15 at column kk, lanes 16-31 the same rows at kk+8
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(a[mt], as + (wm + mt * 16 + (lane & 15)) * SROW + kk + (lane >> 4) * 8);
            // B = W rows (n) x k: matrices (n0-7,k), (n0-7,k+8), (n8-15,k), (n8-15,k+8) for two n-tiles
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                u32 r[4];
                int mat = lane >> 3;
                ldmatrix_x4(r, ws + (wn + np * 16 + (lane & 7) + (mat >> 1) * 8) * SROW + kk + (mat & 1) * 8);
                b[2 * np][0] = r[0];
                b[2 * np][1] = r[1];
                b[2 * np + 1][0] = r[2];
                b[2 * np + 1][1] = r[3];
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++) mma_bf16(acc[mt][nt], a[mt], b[nt]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            int row = m0 + wm + mt * 16 + g, col = n0 + wn + nt * 8 + 2 * c;
            if (col >= N) continue;
            if (row < M) epilogue_pair(e, row, col, acc[mt][nt][0], acc[mt][nt][1]);
            if (row + 8 < M) epilogue_pair(e, row + 8, col, acc[mt][nt][2], acc[mt][nt][3]);
        }
}

// 64 x 64 tiles (large outputs).
extern "C" __global__ void __launch_bounds__(128)
linear_mma(const bf16 *__restrict__ A, int M, const bf16 *__restrict__ W, int N, int K, Epi e) {
    mma_tile<2, 4>(A, M, W, N, K, e);
}

// 32 x 32 tiles: four times the blocks, for outputs too small to fill the GPU with 64 x 64.
extern "C" __global__ void __launch_bounds__(128)
linear_mma_32(const bf16 *__restrict__ A, int M, const bf16 *__restrict__ W, int N, int K, Epi e) {
    mma_tile<1, 2>(A, M, W, N, K, e);
}
