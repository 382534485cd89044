"""Frames between the engine and its matcher processes (aotx.structured.matcher_pool,
aotx.structured.matcher_proc): a u32 little-endian length, then a pickle, over a pair of OS pipes.

Both ends are this package's code in one host's process tree, so pickle is a codec here, not an
input format: nothing else writes to these pipes. A read that finds the pipe closed (the other end
exited) raises ``PeerGone``; one that passes its deadline raises ``TimeoutError``.
"""
from __future__ import annotations

import os
import pickle
import select
import struct
import time

_LEN = struct.Struct("<I")
MAX_FRAME = 1 << 30


class PeerGone(EOFError):
    """The process at the pipe's other end has closed it (it exited, or was killed)."""


def write_frame(fd: int, obj) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_LEN.pack(len(payload)) + payload)
    while data:
        try:
            n = os.write(fd, data)
        except BrokenPipeError:
            raise PeerGone("the matcher process's pipe is closed") from None
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError(f"no frame within the deadline ({n - left} of {n} bytes read)")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise PeerGone("the matcher process closed its pipe")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, deadline: float | None = None):
    """The next frame's object; `deadline` (time.monotonic) bounds the wait, None waits forever."""
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, deadline))
    if n > MAX_FRAME:
        raise ValueError(f"a frame of {n} bytes: the pipe is out of step")
    return pickle.loads(_read_exact(fd, n, deadline))
