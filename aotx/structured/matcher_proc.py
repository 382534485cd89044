"""A matcher process: it owns the llguidance matchers of the rows the engine gave it, advances them
by the tokens the engine read back and writes their next-token bitmasks into shared memory.

    python -m aotx.structured.matcher_proc CMD_FD REPLY_FD     (started by aotx.structured.matcher_pool)

Its own interpreter, so no GIL is shared with the engine thread and its matchers' lexers are its own
(llguidance's copies of one prototype share one lexer mutex: rows of one process fill one after
another, rows of several processes in parallel). One frame in, one frame out, in order:

* in, ``("step", n, shm name, shm size, byte offset, words, keys, outs, counts, tokens, new, drops)``:
  per row its key, its out row and how many of ``tokens`` are its (in row order), ``new`` [(key,
  grammar digest)] rows to start (their grammar came in a prep frame), ``drops`` keys whose sequences
  are gone. Each row consumes its tokens, then (if every token so far was allowed)
  its mask goes to out row r of the uint32 [*, words] array at that offset of the segment.
* out, ``("done", n, ok, errors, consume_s, fill_s)``: ``ok`` one byte a row (0: a token was refused
  or the matcher failed; its bits are not written), ``errors`` [(row index, why)] for the rows whose
  matcher has failed (in this step or before).

* in, ``("prep", 0, tokenizers, grammars)``: ``tokenizers`` [(key, HF JSON, n_vocab, eos)] and
  ``grammars`` [(digest, grammar, tokenizer key)] to build now (a first row of that grammar has gone to
  some process); out, ``("done", 0, b"", [], 0.0, 0.0)``.

It exits when its command pipe closes (the engine closed it, or died).
"""
from __future__ import annotations

import mmap
import os
import sys
import time
from collections import OrderedDict

import llguidance
import numpy as np

from aotx.structured.proc_wire import PeerGone, read_frame, write_frame

PROTOTYPES = 256      # compiled grammars kept (the compiler's cache size)


class Rows:
    def __init__(self) -> None:
        self.tokenizers: dict[str, llguidance.LLTokenizer] = {}
        self.grammars: dict[str, tuple[str, str]] = {}
        self.protos: OrderedDict[str, llguidance.LLMatcher] = OrderedDict()
        self.matchers: dict[int, list] = {}        # key -> [LLMatcher, why it failed or ""]
        self.maps: dict[str, tuple[mmap.mmap, np.ndarray]] = {}

    def _proto(self, digest: str) -> llguidance.LLMatcher:
        proto = self.protos.get(digest)
        if proto is None:
            grammar, tok = self.grammars[digest]
            proto = self.protos[digest] = llguidance.LLMatcher(self.tokenizers[tok], grammar, log_level=0)
            while len(self.protos) > PROTOTYPES:
                self.protos.popitem(last=False)
        self.protos.move_to_end(digest)
        return proto

    def _segment(self, name: str, size: int) -> np.ndarray:
        got = self.maps.get(name)
        if got is None:
            for old in list(self.maps):            # the engine moved to a larger segment: drop the old one
                mm, view = self.maps.pop(old)
                del view
                mm.close()
            fd = os.open(f"/dev/shm/{name}", os.O_RDWR)
            try:
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            got = self.maps[name] = (mm, np.frombuffer(mm, dtype=np.uint8))
        return got[1]

    def prep(self, msg) -> tuple:
        """Tokenizers and grammars to build now (their rows come later): the reply (step 0) is read
        and dropped by the engine's next collect."""
        _, n, tokenizers, grammars = msg
        for key, text, n_vocab, eos in tokenizers:
            self.tokenizers[key] = llguidance.LLTokenizer(text, n_vocab=n_vocab, eos_token=eos)
        for digest, grammar, tok in grammars:
            self.grammars[digest] = (grammar, tok)
            self._proto(digest)
        return ("done", n, b"", [], 0.0, 0.0)

    def step(self, msg) -> tuple:
        _, n, name, size, offset, words, keys, outs, counts, tokens, new, drops = msg
        for key, digest in new:
            self.matchers[key] = [self._proto(digest).deep_copy(), ""]
        for key in drops:       # (after new: a row may start and end between two frames)
            self.matchers.pop(key, None)
        t0 = time.perf_counter()
        live, at = [], 0
        for i, (key, out, count) in enumerate(zip(keys, outs, counts)):
            entry = self.matchers[key]
            for tok in tokens[at:at + count]:
                if not entry[1] and (not entry[0].consume_token(tok) or entry[0].is_error()):
                    why = entry[0].get_error() if entry[0].is_error() else f"token {tok} is not allowed"
                    entry[1] = " ".join(why.split())[:300] or f"token {tok} is not allowed"
            at += count
            live.append((i, out, entry))
        t1 = time.perf_counter()
        base = self._segment(name, size).ctypes.data + offset
        stride = 4 * words
        ok = bytearray(len(keys))
        errors = []
        for i, out, entry in live:
            m = entry[0]
            if not entry[1]:
                m.unsafe_compute_mask_ptr(base + out * stride, stride)
                if m.is_error():
                    entry[1] = " ".join(m.get_error().split())[:300]
            if entry[1]:
                errors.append((i, entry[1]))
            else:
                ok[i] = 1
        return ("done", n, bytes(ok), errors, t1 - t0, time.perf_counter() - t1)


def main(argv: list[str]) -> int:
    cmd, reply = int(argv[0]), int(argv[1])
    nice = os.environ.get("AOTX_MASK_PROC_NICE", "")
    if nice.lstrip("-").isdigit() and int(nice):
        os.nice(int(nice))
    rows = Rows()
    while True:
        try:
            msg = read_frame(cmd)
        except PeerGone:
            return 0
        try:
            out = rows.prep(msg) if msg[0] == "prep" else rows.step(msg)
        except Exception as exc:  # every row of this step fails with the reason; the process goes on
            n_rows = len(msg[6]) if msg[0] == "step" else 0
            why = f"matcher process error: {type(exc).__name__}: {exc}"
            out = ("done", msg[1], bytes(n_rows), [(i, why) for i in range(n_rows)], 0.0, 0.0)
        try:
            write_frame(reply, out)
        except PeerGone:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
