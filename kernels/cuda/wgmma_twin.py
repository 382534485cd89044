"""numpy emulation of linear_wgmma.cu's index logic, for the CPU (no GPU needed): the 128-byte swizzled
shared-memory layout the cp.async loads write, the wgmma matrix descriptors and how the hardware reads
an operand through one (PTX ISA: asynchronous warpgroup matrix shared-memory layout, K-major, 128B
swizzle), the accumulator fragment (m64nNk16) the epilogue scatters, and the stage ring's schedule.

Every function mirrors one rule of kernels/cuda/wgmma.cuh or linear_wgmma.cu (same names). The hardware
side (`hw_operand`) is written from the PTX ISA's definition, independently of the kernel's store side
(`load_tile`): `emulate` runs the kernel's loads, descriptors and fragments through it and must give
exactly x @ w.T; tests/kernels_cuda/test_wgmma.py checks that on the model's shapes.
"""
from __future__ import annotations

import numpy as np

ROW_BYTES = 128          # WG_SWIZZLE_ROW_BYTES: 64 bf16 of K per row
SBO = 1024               # WG_SBO_BYTES: eight rows, one swizzle atom
BK = 64                  # WG_BK
OUT_PAD = 4              # WG_OUT_PAD


def sw128_offset(row: int | np.ndarray, chunk: int | np.ndarray):
    """wgmma.cuh sw128_offset: byte offset of 16-byte chunk `chunk` of row `row` in a tile."""
    return row * ROW_BYTES + ((chunk ^ (row & 7)) << 4)


def wgmma_desc(addr: int) -> int:
    """wgmma.cuh wgmma_desc: the 64-bit matrix descriptor of a K-major, 128B-swizzled tile at `addr`."""
    return ((addr & 0x3FFFF) >> 4) | (1 << 16) | ((SBO >> 4) << 32) | (1 << 62)


def decode_desc(desc: int) -> dict[str, int]:
    """The descriptor's fields as the PTX ISA defines them (bytes, not >> 4)."""
    return {"start": (desc & 0x3FFF) << 4, "lbo": ((desc >> 16) & 0x3FFF) << 4, "sbo": ((desc >> 32) & 0x3FFF) << 4,
            "base_offset": (desc >> 49) & 7, "layout": (desc >> 62) & 3}


def hw_operand(smem: np.ndarray, desc: int, rows: int) -> np.ndarray:
    """What wgmma reads for one k16 slice of a K-major operand: uint16 [rows, 16] from the byte array
    `smem` (the CTA's whole shared window, absolute addresses). Model (PTX ISA): element (r, k) is at
    start + (r // 8) * SBO + (r % 8) * 128 + 2 k, then the 128B swizzle permutes the absolute address:
    bits [4:6] ^= bits [7:9]."""
    f = decode_desc(desc)
    if f["layout"] != 1 or f["base_offset"] != 0:
        raise ValueError(f"only the 128B swizzle with base offset 0 is modelled: {f}")
    r = np.arange(rows)[:, None]
    k = np.arange(16)[None, :]
    addr = f["start"] + (r // 8) * f["sbo"] + (r % 8) * ROW_BYTES + 2 * k
    phys = addr ^ (((addr >> 7) & 7) << 4)
    return smem.view(np.uint16)[phys // 2]


def load_tile(smem: np.ndarray, tile_base: int, src: np.ndarray, r0: int, k0: int, rows: int, threads: int) -> None:
    """linear_wgmma.cu's load lambda for one operand: `rows` rows of src (uint16 [R, K]) from row r0,
    columns k0 .. k0 + 63, as 16-byte chunks q = tid + i * threads -> (row q / 8, chunk q % 8) for
    i < rows * 8 / threads (all threads at once here); rows past the end are zero-filled (cp.async
    src-size 0)."""
    assert (rows * 8) % threads == 0
    q = (np.arange(threads)[None, :] + threads * np.arange(rows * 8 // threads)[:, None]).ravel()
    row, ch = q >> 3, q & 7
    dst = tile_base + sw128_offset(row, ch)
    assert (dst % 16 == 0).all() and len(np.unique(dst)) == len(dst)
    padded = np.zeros((rows, BK), dtype=np.uint16)
    have = src[r0:r0 + rows, k0:k0 + BK]
    padded[:len(have)] = have
    u16 = smem.view(np.uint16)
    u16[(dst // 2)[:, None] + np.arange(8)[None, :]] = padded[row[:, None], ch[:, None] * 8 + np.arange(8)[None, :]]


def tma_box(smem: np.ndarray, dst: int, src: np.ndarray, x: int, y: int, box_rows: int) -> None:
    """What cp.async.bulk.tensor.2d writes for a tensor map of tensor_map_args (wgmma_plan): the box of
    `box_rows` rows from row y, 64 elements from column x, of the 2-D tensor `src` (uint16 [rows, K]),
    elements outside the tensor zero; box row r is the r-th 128-byte row at dst, and the 128B swizzle (CUDA
    programming guide, TMA swizzle modes) puts its 16-byte chunk c at chunk c ^ (r % 8) of the row (the
    pattern of 1,024-byte repeats: dst 1024-aligned). Written from that definition, not from load_tile."""
    assert dst % 1024 == 0
    box = np.zeros((box_rows, BK), dtype=np.uint16)
    have = src[max(y, 0):y + box_rows, max(x, 0):x + BK]
    box[:have.shape[0], :have.shape[1]] = have
    u16 = smem.view(np.uint16)
    for r in range(box_rows):
        for c in range(8):
            at = dst + r * 128 + (((r % 8) ^ c) * 16)
            u16[at // 2: at // 2 + 8] = box[r, c * 8: c * 8 + 8]


def fragment_coords(bn: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) within a warpgroup's 64 x bn accumulator of d[i] of thread t: int arrays [128, bn / 2]."""
    t = np.arange(128)[:, None]
    i = np.arange(bn // 2)[None, :]
    warp, lane = t // 32, t % 32
    g, c = lane // 4, lane % 4
    j, h, p = i // 4, (i // 2) % 2, i % 2
    return warp * 16 + g + 8 * h, 8 * j + 2 * c + p


def schedule(ktiles: int, stages: int, ahead: int | None = None) -> list[tuple[str, int, int]]:
    """The main loop's events in program order: ("load", k-tile, buffer), ("mma", k-tile, buffer). Checks,
    as it goes, the two rules the kernel relies on: cp.async.wait_group(stages - 3) at iteration kt
    leaves k-tile kt landed, and a buffer is refilled only when no warpgroup can still be reading it
    (after the barrier of iteration kt every warpgroup has waited for k-tile kt - 2; k-tiles kt - 1
    and kt may still be on the tensor cores). ``ahead``: how far ahead the loop loads (the kernel:
    stages - 2; other values only to show the checks bite)."""
    ahead = stages - 2 if ahead is None else ahead
    events: list[tuple[str, int, int]] = []
    groups: list[int] = []               # committed cp.async groups, the k-tile each loads (-1: empty)
    phases = [0] * stages                # completed phases of each stage's mbarrier (the TMA variants)

    def load(kt: int) -> None:
        if kt < ktiles:
            events.append(("load", kt, kt % stages))
            groups.append(kt)
            phases[kt % stages] += 1     # the copy lands at once: the worst case for parity aliasing
        else:
            groups.append(-1)

    for s in range(ahead):
        load(s)
    for kt in range(ktiles):
        complete = groups[:len(groups) - (stages - 3)] if stages > 3 else groups
        assert kt in complete, f"k-tile {kt} not landed at its wait"
        # TMA: mbarrier.try_wait.parity((kt / stages) & 1) returns once the phase of that parity has
        # completed; right only if the stage's barrier is exactly one phase past it (never two: aliasing)
        done, use = phases[kt % stages], kt // stages
        assert done == use + 1 and (done - 1) % 2 == mbar_parity(kt, stages), f"k-tile {kt}: phase {done}"
        events.append(("mma", kt, kt % stages))
        busy = {x % stages for x in (kt - 1, kt) if x >= 0}
        busy |= {x % stages for x in range(kt + 1, kt + ahead) if x < ktiles}   # landing, not yet read
        nxt = kt + ahead
        if nxt < ktiles:
            assert nxt % stages not in busy, f"k-tile {nxt} overwrites a buffer in use at iteration {kt}"
        load(nxt)
    return events


def mbar_parity(kt: int, stages: int) -> int:
    """linear_wgmma.cu: the parity k-tile kt waits for on its stage's mbarrier (its use kt / stages)."""
    return (kt // stages) & 1


def emulate(x: np.ndarray, w: np.ndarray, bm: int, bn: int, stages: int, base: int = 0, tma: bool = False) -> np.ndarray:
    """linear_wgmma's output (float32 [M, N], EPI_STORE) for bf16 bits x [M, K], w [N, K], computed
    through the kernel's loads (``tma``: the TMA boxes of the linear_wgmma_tma_* variants), ring buffers,
    descriptors and fragment scatter; `base` is the dynamic shared memory's address before the kernel
    rounds it up to 1024."""
    m, kdim = x.shape
    n = w.shape[0]
    assert kdim % BK == 0 and n % 8 == 0
    wgs, threads = bm // 64, 128 * (bm // 64)
    a_bytes, stage_bytes = bm * ROW_BYTES, (bm + bn) * ROW_BYTES
    aligned = (base + 1023) & ~1023
    smem = np.zeros(aligned + stages * stage_bytes, dtype=np.uint8)
    out = np.full((m, n), np.nan, dtype=np.float32)
    rows_f, cols_f = fragment_coords(bn)
    for m0 in range(0, m, bm):
        for n0 in range(0, n, bn):
            d = np.zeros((wgs, 128, bn // 2), dtype=np.float32)
            for ev, kt, buf in schedule(kdim // BK, stages):
                sa = aligned + buf * stage_bytes
                if ev == "load" and tma:
                    tma_box(smem, sa, x, kt * BK, m0, bm)
                    tma_box(smem, sa + a_bytes, w, kt * BK, n0, bn)
                    continue
                if ev == "load":
                    load_tile(smem, sa, x, m0, kt * BK, bm, threads)
                    load_tile(smem, sa + a_bytes, w, n0, kt * BK, bn, threads)
                    continue
                for wg in range(wgs):
                    for kk in range(BK // 16):
                        a = hw_operand(smem, wgmma_desc(sa + wg * 64 * ROW_BYTES + 32 * kk), 64)
                        b = hw_operand(smem, wgmma_desc(sa + a_bytes + 32 * kk), bn)
                        prod = _f32(a) @ _f32(b).T                       # [64, bn]
                        d[wg] += prod[rows_f, cols_f]
            # the epilogue: fragments -> a [BM, BN + OUT_PAD] float32 tile in shared memory (over the stage
            # buffers, the rows' positions and slots after it), then the chunks of eight columns of
            # epilogue_chunks, each thread's U at a time (EPI_STORE here: epilogue8 has the other modes)
            tile = np.full((bm, bn + OUT_PAD), np.nan, dtype=np.float32)
            assert tile.nbytes + 2 * bm * 4 <= stages * stage_bytes
            for wg in range(wgs):
                tile[wg * 64 + rows_f, cols_f] = d[wg]
            row, col = epilogue_chunks(bm, bn, threads)
            ok = (m0 + row < m) & (n0 + col < n)
            for i in range(8):
                out[m0 + row[ok], n0 + col[ok] + i] = tile[row[ok], col[ok] + i]
    return out


def _f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


EPI_GROUP = 4            # WG_EPI_GROUP
EPI_STORE, EPI_ADD, EPI_SWIGLU, EPI_QKV = 0, 1, 2, 3


def epilogue_chunks(bm: int, bn: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """wgmma_epilogue's work split: (row, first column) within the tile of the chunks of eight columns
    thread t takes, in its order: int arrays [threads, BM * BN / 8 / threads] (chunk q = t + i threads)."""
    cpr = bn // 8
    per = bm * cpr // threads
    assert per * threads == bm * cpr and per % min(per, EPI_GROUP) == 0
    q = np.arange(threads)[:, None] + np.arange(per)[None, :] * threads
    return q // cpr, (q % cpr) * 8


def epilogue8(mode: int, y: np.ndarray, out: np.ndarray | None = None, rope: np.ndarray | None = None,
              positions: np.ndarray | None = None, slots: np.ndarray | None = None, k_cache=None, v_cache=None,
              head_dim: int = 0, q_size: int = 0, kv_size: int = 0, norm_w=None, norm_out=None, ss_out=None,
              ss_in=None, ss_groups: int = 0, eps: float = 0.0) -> None:
    """epilogue.cuh's epi8_fetch / epi8_put on every chunk of eight columns of y (float32 [M, N], the GEMM's
    output), index for index: out float32 [M, ld] (EPI_STORE, EPI_ADD: +=; EPI_QKV: q out [M, q_size]) or
    float32 [M, ld] of the bf16-rounded SwiGLU (EPI_SWIGLU); rope float32 [max_pos, head_dim / 2, 2]; caches
    float32 [slots, kv_size] holding bf16-rounded values. The folded RMSNorm (launchers.epi's norm fields):
    ss_in [M, ss_groups] scales each row by its rstd first; EPI_ADD with norm_out (float32 [M, ld], bf16-rounded
    values) also writes bf16(r * norm_w) and ss_out [M, ld / 64] (each 64 columns' sum of r^2). In place."""
    from kernels.cuda.twins import round_bf16

    m_rows, n_cols = y.shape
    assert n_cols % 8 == 0
    for m in range(m_rows):
        rstd = np.float32(1)
        if ss_in is not None:
            rstd = np.float32(1) / np.sqrt(np.float32(ss_in[m, :ss_groups].sum(dtype=np.float32))
                                           / np.float32(64 * ss_groups) + np.float32(eps))
        for n in range(0, n_cols, 8):
            v = y[m, n:n + 8].astype(np.float32).copy()
            if ss_in is not None:
                v *= rstd
            if mode == EPI_STORE:
                out[m, n:n + 8] = v
            elif mode == EPI_ADD:
                r = out[m, n:n + 8] + v
                out[m, n:n + 8] = r
                if norm_out is not None:
                    norm_out[m, n:n + 8] = round_bf16(r * norm_w[n:n + 8])
                    ss_out[m, n // 64] += np.float32((r * r).sum(dtype=np.float32))
            elif mode == EPI_SWIGLU:
                g, u = v[0::2], v[1::2]
                out[m, n // 2:n // 2 + 4] = round_bf16(g / (np.float32(1) + np.exp(-g)) * u)
            else:
                qk = q_size + kv_size
                if n < qk:
                    cs = rope[positions[m], (n % head_dim) // 2:(n % head_dim) // 2 + 4]   # [4, (cos, sin)]
                    x0, x1 = v[0::2].copy(), v[1::2].copy()
                    v[0::2] = x0 * cs[:, 0] - x1 * cs[:, 1]
                    v[1::2] = x0 * cs[:, 1] + x1 * cs[:, 0]
                if n < q_size:
                    out[m, n:n + 8] = v
                elif slots[m] >= 0:
                    cache, col = (k_cache, n - q_size) if n < qk else (v_cache, n - qk)
                    cache[slots[m], col:col + 8] = round_bf16(v)
