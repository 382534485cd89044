"""The parts of one multi-part transfer checked in one go (aotx.journal.whole's fast path).

`parts_checker(count)` answers a function `check(data, off, kind, tid, lh, blen, end)` for a transfer of
`count` parts (2 ≤ count) whose part 0 starts at `off` and whose final part ends at `end` carrying `blen`
body bytes: the transfer's data (its bodies joined, payload || digest) where every part's header is the one
packed from part 0's fields (type 37, class 'A', the body's length — 160 for every part but the final —,
`kind`, `tid`, its index, `count`, its body's crc32c, `lh`), else None. The caller has checked that the
message holds `end` bytes, that the final part's length is 1..160, and part 0's own fields.

For up to MAX_GENERATED parts the function is written once per count (like aotx.journal.fast_decode):
one struct unpack takes every full body, one struct pack builds every header with its body, and one
comparison checks them against the message's bytes; the crc32c of every body is taken as before. Larger
transfers are checked part by part (`_loop`), which checks exactly the same.
"""

from __future__ import annotations

import functools
import struct
from typing import Callable, Optional

from .crc32c import _VALUE, crc32c_reference
from .record import HEADER, HEADER_SIZE, MAX_BODY, RECORD_CLASS, RECORD_TYPE

MAX_GENERATED = 32   # transfers of up to 5 KB: one generated check per part count
_RECORD = HEADER_SIZE + MAX_BODY
_crc: Callable[[bytes], int] = _VALUE if _VALUE is not None else crc32c_reference
_pack_header = HEADER.pack
_checkers: dict[int, Callable[..., Optional[bytes]]] = {}
# a full part's first 4 header bytes (type, class, body length 160), a final part's first 2 (type, class)
_FULL = struct.pack("<BBH", RECORD_TYPE, RECORD_CLASS, MAX_BODY)
_LAST = struct.pack("<BB", RECORD_TYPE, RECORD_CLASS)


def parts_checker(count: int) -> Callable[..., Optional[bytes]]:
    check = _checkers.get(count)
    if check is None:
        check = _checkers[count] = _generated(count) if count <= MAX_GENERATED else functools.partial(_loop, count)
    return check


def _generated(count: int) -> Callable[..., Optional[bytes]]:
    """The check of a `count`-part transfer, as straight-line code (its layout in two struct formats)."""
    full = count - 1
    ns = {"BODIES": struct.Struct("<" + f"{HEADER_SIZE}x{MAX_BODY}s" * full).unpack_from,
          # a full part: 4s = type, class, length 160; I kind; Q id; 4s = index, count; I crc32c; Q lineage; body
          # the final part's header: 2s = type, class; H length; I kind; Q id; 4s = index, count; I crc32c; Q lineage
          "PACK": struct.Struct("<" + "4sIQ4sIQ160s" * full + "2sHIQ4sIQ").pack,
          "F": _FULL, "L": _LAST, "C": _crc, "join": b"".join}
    names = [f"b{i}" for i in range(full)]
    args = []
    for i in range(full):
        ns[f"I{i}"] = struct.pack("<HH", i, count)
        args.append(f"F, kind, tid, I{i}, C(b{i}), lh, b{i}")
    ns[f"I{full}"] = struct.pack("<HH", full, count)
    args.append(f"L, blen, kind, tid, I{full}, C(z), lh")
    src = (f"def check(data, off, kind, tid, lh, blen, end):\n"
           f"    {', '.join(names)}, = BODIES(data, off)\n"
           f"    fin = off + {full * _RECORD + HEADER_SIZE}\n"
           f"    z = data[fin:end]\n"
           f"    if PACK({', '.join(args)}) != data[off:fin]:\n"
           f"        return None\n"
           f"    return join(({', '.join(names)}, z))\n")
    exec(src, ns)   # noqa: S102 — generated from the record layout, once per part count
    return ns["check"]


def _loop(count: int, data: bytes, off: int, kind: int, tid: int, lh: int, blen: int, end: int) -> Optional[bytes]:
    """The same check, part by part (transfers over MAX_GENERATED parts)."""
    parts = []
    for i in range(count):
        start = off + HEADER_SIZE
        n = MAX_BODY if i < count - 1 else blen
        body = data[start:start + n]
        if data[off:start] != _pack_header(RECORD_TYPE, RECORD_CLASS, n, kind, tid, i, count, _crc(body), lh):
            return None
        parts.append(body)
        off = start + n
    return b"".join(parts)
