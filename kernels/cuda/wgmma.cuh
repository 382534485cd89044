// Hopper warpgroup MMA (wgmma.mma_async, sm_90a) building blocks for linear_wgmma.cu. Every index rule
// here has a numpy mirror in kernels/cuda/wgmma_twin.py, tested on the CPU (tests/kernels_cuda/test_wgmma.py).
//
// Shared-memory operand layout: "K-major, 128-byte swizzle" (PTX ISA, asynchronous warpgroup matrix
// shared memory layout). A tile of R rows (M for A, N for B) by 64 bf16 of K is R rows of 128 bytes;
// row r starts at byte 128 r; within a row the eight 16-byte chunks are permuted: logical chunk c
// (k = 8 c .. 8 c + 7) sits at chunk c ^ (r % 8). The hardware applies that XOR to the address bits
// [4:6] ^= [7:9] of the *absolute* shared address, so every tile starts 1024-byte aligned (base
// offset 0). This is also what a TMA copy with CU_TENSOR_MAP_SWIZZLE_128B and a {64, R} box writes.
//
// Descriptor (64 bits): start address >> 4 in bits 0-13, leading byte offset >> 4 in 16-29 (unused
// for swizzled K-major: 1), stride byte offset >> 4 in 32-45 (1024: eight rows of 128 bytes, the
// distance between 8-row core-matrix groups), base offset in 49-51 (0), layout in 62-63 (1 = 128B
// swizzle). The k16 slice kk (0..3) of a 64-wide K tile starts 32 kk bytes further: the hardware
// swizzles the address it forms, so the same XOR rule finds every element.
//
// Accumulator fragment (m64nNk16, float32): thread t of the warpgroup (warp w = t / 32, lane l,
// g = l / 4, c = l % 4) holds N / 2 floats; d[4 j + 2 h + i] is row 16 w + g + 8 h, column
// 8 j + 2 c + i (j < N / 8, h, i in {0, 1}): pairs of adjacent columns, as mma.sync's m16n8.
#pragma once
#include "common.cuh"

#define WG_SWIZZLE_ROW_BYTES 128
#define WG_SBO_BYTES 1024

// Byte offset of 16-byte chunk `chunk` (k = 8 chunk ..) of row `row` in a 128B-swizzled K-major tile.
__device__ __forceinline__ u32 sw128_offset(int row, int chunk) {
    return (u32)(row * WG_SWIZZLE_ROW_BYTES + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ u64 wgmma_desc(u32 smem_addr) {
    u64 d = (u64)((smem_addr & 0x3FFFF) >> 4);
    d |= (u64)1 << 16;                     // leading byte offset (unused here)
    d |= (u64)(WG_SBO_BYTES >> 4) << 32;   // stride byte offset
    d |= (u64)1 << 62;                     // 128-byte swizzle
    return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins the accumulator registers at this point of the program for the compiler: the wgmma asm statements
// name them, but the wait does not, so without this plain reads of d (the epilogue) could be scheduled
// before wgmma_wait<0>() returns.
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(float *d) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}
// Generic-proxy writes (cp.async, st.shared) made visible to the async proxy (wgmma's operand reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// The wgmma instructions take the scale-d predicate from a register (1: D += A B). Generated text.
// d[32] (64 x 64 float32, the fragment layout above) += A (64 x 16) * B (64 x 16)^T, both from shared memory.
__device__ __forceinline__ void wgmma_m64n64k16(float *d, u64 desc_a, u64 desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d[64] (64 x 128 float32, the fragment layout above) += A (64 x 16) * B (128 x 16)^T, both from shared memory.
__device__ __forceinline__ void wgmma_m64n128k16(float *d, u64 desc_a, u64 desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d[128] (64 x 256 float32, the fragment layout above) += A (64 x 16) * B (256 x 16)^T, both from shared memory.
__device__ __forceinline__ void wgmma_m64n256k16(float *d, u64 desc_a, u64 desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

template <int N>
__device__ __forceinline__ void wgmma_m64k16(float *d, u64 desc_a, u64 desc_b);
template <>
__device__ __forceinline__ void wgmma_m64k16<64>(float *d, u64 a, u64 b) { wgmma_m64n64k16(d, a, b); }
template <>
__device__ __forceinline__ void wgmma_m64k16<128>(float *d, u64 a, u64 b) { wgmma_m64n128k16(d, a, b); }
template <>
__device__ __forceinline__ void wgmma_m64k16<256>(float *d, u64 a, u64 b) { wgmma_m64n256k16(d, a, b); }

// ---- TMA (cp.async.bulk.tensor) and mbarriers, for the linear_wgmma_tma_* variants ----
// A CUtensorMap (128 opaque bytes, 64-byte aligned), made on the host by cuTensorMapEncodeTiled
// (kernels/cuda/wgmma_plan.py tensor_map_args: 2-D bf16 [rows, K], box {64, box rows}, 128B swizzle,
// out-of-bounds elements zero-filled) and passed by value as a __grid_constant__ kernel parameter.
struct __align__(64) TmaMap {
    u64 v[16];
};

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// The inits visible to the other threads and to the async proxy (the TMA unit's complete_tx).
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival (the barrier's count is 1) that also expects `bytes` of TMA transactions this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Spins until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    u32 done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}
// The box at (inner coordinate x = k, outer y = row) of the tensor `map` into shared `dst` (1024-aligned);
// completion counted on mbarrier `bar` in bytes (the whole box, zero-filled parts included).
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap *map, int x, int y, u32 bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(x), "r"(y), "r"(bar)
        : "memory");
}
