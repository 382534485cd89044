"""Kernel parameters packed for ``cuLaunchKernel(Ex)`` with little host work a launch.

The driver copies a launch's parameters when it is called (a captured graph node keeps its own copy), so
one buffer per argument signature, per thread, serves launch after launch: the values are written with one
``struct.pack_into`` and the array of pointers to them is built once. A ctypes Structure argument (``s`` in
the signature: an ``Epi``, a ``TmaMap``) is passed where it lies: its slot in the pointer array is set per
launch. Measured on the CPU with the driver call stubbed out: 8.8 µs a launch with a fresh ctypes object per
argument (the former packing), 19.8 µs with programmatic dependent launch (a new ``CUlaunchAttribute`` a
launch); see docs/PERFORMANCE.md, session 10.
"""
from __future__ import annotations

import ctypes
import struct
import threading

# signature code -> struct format (native alignment, as C lays out each value on its own)
_FMT = {"p": "Q", "i": "i", "f": "f"}


class ArgPack:
    """The parameter buffer of one signature: ``pointers(values)`` -> the address of a ``void *[]``."""

    __slots__ = ("_fmt", "_buf", "_ptrs", "_structs", "_scalars", "_addr")

    def __init__(self, sig: str) -> None:
        self._structs = [i for i, c in enumerate(sig) if c == "s"]
        self._scalars = [i for i, c in enumerate(sig) if c != "s"]
        bad = [c for c in sig if c != "s" and c not in _FMT]
        if bad:
            raise ValueError(f"unknown argument codes {bad!r} in signature {sig!r}")
        fmt = "@" + "".join(_FMT[sig[i]] for i in self._scalars)
        self._fmt = struct.Struct(fmt)
        self._buf = ctypes.create_string_buffer(max(8, self._fmt.size))
        base = ctypes.addressof(self._buf)
        offsets, prefix = [], "@"
        for i in self._scalars:
            code = _FMT[sig[i]]
            # the offset of this value: the size of the prefix padded to the value's own alignment
            offsets.append(struct.calcsize(prefix + code) - struct.calcsize(code))
            prefix += code
        self._ptrs = (ctypes.c_void_p * max(1, len(sig)))()
        for i, off in zip(self._scalars, offsets):
            self._ptrs[i] = base + off
        self._addr = ctypes.addressof(self._ptrs)

    def pointers(self, args) -> int:
        """Write ``args`` (in signature order) and return the parameter array's address (valid until the
        next call on this thread with this signature)."""
        scalars = self._scalars
        if self._structs:
            for i in self._structs:
                self._ptrs[i] = ctypes.addressof(args[i])
            self._fmt.pack_into(self._buf, 0, *[args[i] for i in scalars])
        else:
            self._fmt.pack_into(self._buf, 0, *args)
        return self._addr


_local = threading.local()


def pack(sig: str, args) -> int:
    """This thread's ArgPack for ``sig``, filled with ``args``: the address ``cuLaunchKernel`` takes."""
    packs = getattr(_local, "packs", None)
    if packs is None:
        packs = _local.packs = {}
    p = packs.get(sig)
    if p is None:
        p = packs[sig] = ArgPack(sig)
    return p.pointers(args)
