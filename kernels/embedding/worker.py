"""The embedding model in a process of its own: `python -m kernels.embedding.worker`.

A server embeds inputs' texts here, not in a thread of its own process, so that the forward (≈150
numpy calls per batch) never queues for that process's GIL behind the event loop and the engine's
thread, nor they behind it; its BLAS threads use cores the server leaves idle.

Frames on stdin / stdout, little-endian (kernels.embedding.process writes and reads them):
  ready  (worker → client, once the model is loaded): b"R", u32 dim
  embed  (client → worker): b"E", u32 n, then n times u32 length + UTF-8 bytes
  answer (worker → client): b"V", u32 n, u32 dim, n·dim float32; or b"X", u32 length, UTF-8 message
End of stdin (the client closed it, or its process died) ends the worker; it ignores SIGTERM, SIGINT and SIGHUP
(sent to the server's whole process group, they must not end it before the server drained).
"""
from __future__ import annotations

import os
import signal
import struct
import sys
from typing import BinaryIO

U32 = struct.Struct("<I")


def read_exact(stream: BinaryIO, n: int) -> bytes | None:
    """n bytes, or None at the end of the stream."""
    out = bytearray()
    while len(out) < n:
        chunk = stream.read(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def read_texts(stream: BinaryIO) -> list[str] | None:
    """One embed frame's texts; None at the end of the stream."""
    head = read_exact(stream, 5)
    if head is None:
        return None
    if head[:1] != b"E":
        raise ValueError(f"unknown frame {head[:1]!r}")
    texts = []
    for _ in range(U32.unpack(head[1:])[0]):
        size = read_exact(stream, 4)
        body = None if size is None else read_exact(stream, U32.unpack(size)[0])
        if body is None:
            return None
        texts.append(body.decode("utf-8"))
    return texts


def main() -> int:
    # the server's process group may get SIGTERM / SIGINT (a terminal's Ctrl-C, a supervisor): the server
    # drains and then closes our stdin; dying first would fail the inputs it drains. The end of stdin
    # (the server stopped, or was killed) ends us; SIGKILL still does at once.
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):   # (SIGHUP: the server's grant reload)
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb")   # the protocol's own stdout; stray prints go to stderr
    os.dup2(2, 1)
    from kernels.embedding.model import load_embedding_model
    model = load_embedding_model()
    out.write(b"R" + U32.pack(model.dim))
    out.flush()
    stdin = sys.stdin.buffer
    while True:
        texts = read_texts(stdin)
        if texts is None:
            return 0
        try:
            vectors = model.embed(texts)
        except Exception as exc:  # the client raises it for this batch; the worker serves the next one
            message = f"{type(exc).__name__}: {exc}".encode("utf-8")
            out.write(b"X" + U32.pack(len(message)) + message)
        else:
            out.write(b"V" + U32.pack(len(texts)) + U32.pack(model.dim) + vectors.astype("<f4").tobytes())
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
