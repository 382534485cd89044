"""Matcher processes: the constrained rows' llguidance matchers, partitioned over N processes
(aotx.structured.matcher_proc) that consume the tokens the engine reads back and write each row's
next-token bitmask into a shared-memory segment the engine copies from.

Why (docs/PERFORMANCE.md, issue 14, session 8): a thread shares the GIL with the engine thread, and
llguidance's copies of one prototype share one lexer mutex; a process has neither.

* ``adopt(row)`` moves a RowMatcher's row into the process with the fewest live rows (a new process is
  started in place of one that died): the engine keeps a ProcRowMatcher (aotx.structured.proc_row).
* ``submit(rows, words)``, on the engine thread, in launch order: one frame to each process with its
  rows' new tokens (a few bytes a row); returns a ticket. ``collect(ticket, bits)`` waits for the
  processes' replies (the GIL released while it waits) and copies the segment's rows into ``bits``.
  A row that refused a token, or whose process died or did not answer within ``timeout_s``
  (``AOTX_MASK_PROC_TIMEOUT_S``, 60 s: the process is killed), fails with the reason and gets every
  token allowed in that mask (its request ends with an error when its token is read back); the other
  rows go on. Steps alternate between two halves of the segment.
* ``close()`` closes the pipes, kills a process still alive after 2 s, unlinks every segment (also when
  collected or at exit); a process whose engine dies sees its pipe close and exits.
"""
from __future__ import annotations

import mmap
import os
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
import numpy as np

from aotx.structured.proc_row import ProcRowMatcher, check_learnt
from aotx.structured.proc_wire import PeerGone, read_frame, write_frame


def timeout_s() -> float:
    raw = os.environ.get("AOTX_MASK_PROC_TIMEOUT_S", "")
    try:
        return float(raw) if raw else 60.0
    except ValueError:
        return 60.0


class MatcherProcess:
    """One process: what it has been sent (tokenizer keys, grammar digests), its live rows, new rows and
    rows gone for its next step frame."""

    def __init__(self, index: int) -> None:
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "aotx.structured.matcher_proc", str(cmd_r), str(rep_w)],
                pass_fds=(cmd_r, rep_w), stdin=subprocess.DEVNULL, env=env)
        except BaseException:
            for fd in (cmd_w, rep_r):
                os.close(fd)
            raise
        finally:
            os.close(cmd_r)
            os.close(rep_w)
        self.cmd, self.rep = cmd_w, rep_r
        # frames go out in order: a prep frame (a tokenizer: megabytes) is written by a thread of its own
        # so that the engine does not wait for the process to read it; the next frame waits for it
        self.wlock = threading.Lock()
        self.index = index
        self.dead: str | None = None            # why its rows fail (set once)
        self.keys: set[int] = set()             # live rows
        self.drops: deque[int] = deque()        # rows gone since the last frame (finalizers append, any thread)
        self.new: list[tuple[int, str]] = []
        self.known: set[str] = set()            # grammar digests and tokenizer keys sent (or queued)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def send(self, obj) -> None:
        with self.wlock:
            write_frame(self.cmd, obj)

    def send_later(self, obj) -> None:
        """Write `obj` on a thread of its own, before any later frame (the lock passes to that thread)."""
        self.wlock.acquire()

        def write() -> None:
            try:
                write_frame(self.cmd, obj)
            except (PeerGone, OSError):
                self.fail(f"matcher process {self.index} (pid {self.pid}) closed its pipe")
            finally:
                self.wlock.release()
        threading.Thread(target=write, name=f"aotx-mask-proc-{self.index}-prep", daemon=True).start()

    def fail(self, why: str) -> None:
        if self.dead is None:
            self.dead = why
        if self.popen.poll() is None:
            self.popen.kill()

    def exit_reason(self) -> str:
        try:
            code = self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        return f"matcher process {self.index} (pid {self.pid}) exited" + (f" with code {code}" if code is not None else "")

    def close(self) -> None:
        if self.cmd >= 0:
            if not self.wlock.acquire(timeout=2):   # a prep frame the process does not read: end it
                self.popen.kill()
                self.wlock.acquire(timeout=10)
            try:
                os.close(self.cmd)          # the process reads EOF and exits
                self.cmd = -1
            finally:
                self.wlock.release()
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.rep >= 0:
            os.close(self.rep)
            self.rep = -1
        if self.dead is None:
            self.dead = "the matcher processes were closed"


class Segment:
    """A POSIX shared-memory file (/dev/shm) mapped here; the processes map it by name. Made directly
    rather than with multiprocessing.shared_memory, which starts a resource-tracker process."""

    def __init__(self, size: int) -> None:
        self.name = f"aotx-mask-{os.getpid()}-{id(self):x}-{time.monotonic_ns():x}"
        self.size = size
        fd = os.open(f"/dev/shm/{self.name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            self.buf = mmap.mmap(fd, size)
        except BaseException:
            os.unlink(f"/dev/shm/{self.name}")
            raise
        finally:
            os.close(fd)

    def close(self) -> None:
        if not self.buf.closed:
            self.buf.close()
        try:
            os.unlink(f"/dev/shm/{self.name}")
        except FileNotFoundError:
            pass


class Ticket:
    def __init__(self, n: int, shm: Segment, offset: int, words: int, rows: list, parts: dict,
                 counts: list[int]) -> None:
        self.n, self.shm, self.offset, self.words = n, shm, offset, words
        self.rows, self.parts, self.counts = rows, parts, counts   # parts: process -> its rows' indexes
        self.collected = threading.Event()
        self.lock = threading.Lock()
        self.claimed = False            # a collect has begun (its half of the segment is being read)
        self.abandoned = False          # never to be collected (its mask never ran): its half is free


def _cleanup(procs: list, segments: list) -> None:
    for proc in procs:
        if proc is not None:
            proc.close()
    for shm in segments:
        shm.close()
    segments.clear()


class MatcherPool:
    def __init__(self, size: int, timeout: float | None = None) -> None:
        if size < 1:
            raise ValueError("a matcher pool needs at least one process")
        self.size = size
        self.timeout_s = timeout_s() if timeout is None else timeout
        self._procs: list[MatcherProcess | None] = [None] * size
        self._segments: list[Segment] = []   # the last is current
        self._cap = self._words = 0
        self._n = 0
        self._slots: list[Ticket | None] = [None, None]
        self._keys = 0
        self.closed = False
        self.started = 0                       # processes started (tests)
        self.consume_s = self.fill_s = 0.0     # the processes' own time (the slowest each step)
        self.steps = 0
        self._final = weakref.finalize(self, _cleanup, self._procs, self._segments)

    def start(self, tokenizer_source: tuple | None = None) -> None:
        """Start every process now (not at the first constrained step) and, given the engine's tokenizer
        (aotx.structured.tokenizer_key), have each build it now: the first request then waits for
        neither (~0.3 s each)."""
        self._least_loaded()
        if tokenizer_source is not None:
            self._prepare(None, tokenizer_source)

    # -- rows ------------------------------------------------------------------
    def adopt(self, row) -> ProcRowMatcher:
        """`row` (a RowMatcher, maybe with tokens consumed already) as a row of the least loaded process."""
        constraint = getattr(row, "constraint", None)
        if constraint is None or getattr(constraint, "source", None) is None:
            raise ValueError("this constraint records no tokenizer source: it cannot move to a matcher process")
        if self.closed:
            raise RuntimeError("the matcher processes are closed")
        proc = self._least_loaded()
        key = self._keys = self._keys + 1
        self._prepare(constraint)
        proc.new.append((key, constraint.digest))
        proc.keys.add(key)
        out = ProcRowMatcher(proc, key, row.tokens, constraint)
        weakref.finalize(out, _forget, proc, key).atexit = False
        return out

    def _prepare(self, constraint, tok: tuple | None = None) -> None:
        """Every live process gets the constraint's tokenizer and grammar the first time one of its rows
        comes (a "prep" frame: each builds them now, in parallel, off the engine thread), so a row sent
        to any of them later finds its prototype built."""
        tok = constraint.source if constraint is not None else tok
        for proc in self._procs:
            if proc is None or proc.dead is not None:
                continue
            toks = [tok] if tok[0] not in proc.known else []
            grammars = ([(constraint.digest, constraint.grammar, tok[0])]
                        if constraint is not None and constraint.digest not in proc.known else [])
            if not toks and not grammars:
                continue
            proc.known.update([tok[0]] + [g[0] for g in grammars])
            proc.send_later(("prep", 0, toks, grammars))

    def _least_loaded(self) -> MatcherProcess:
        best = None
        for i, proc in enumerate(self._procs):
            if proc is None or proc.dead is not None:
                if proc is not None:
                    proc.close()
                proc = self._procs[i] = MatcherProcess(i)
                self.started += 1
            if best is None or len(proc.keys) < len(best.keys):
                best = proc
        assert best is not None
        return best

    def processes(self) -> list[MatcherProcess]:
        return [p for p in self._procs if p is not None]

    # -- steps -----------------------------------------------------------------
    def submit(self, rows: list[ProcRowMatcher], words: int, learnt: list[int] | None = None,
               known: list[int] | None = None) -> Ticket:
        """Send each process its rows of this step (row j's bits go to out row j); in launch order, on one
        thread. ``learnt[j]`` (>= 0): row j's token just read back from the device, its output token
        ``known[j] - 1``; ``known[j]``: the tokens row j must have seen (the engine's count). One pass
        over the rows (the engine thread's share: a few list appends a row)."""
        n = self._n = self._n + 1
        prev = self._slots[n % 2]
        if prev is not None and not prev.collected.is_set():
            with prev.lock:     # a mask that never ran (its launch failed first) gives its half up
                prev.abandoned = not prev.claimed
            if prev.claimed and not prev.collected.wait(self.timeout_s):
                raise RuntimeError(f"mask step {prev.n} is still being collected: its half of the segment is in use")
        shm = self._segment(len(rows), words)
        offset = (n % 2) * self._cap * words * 4
        # plain lists (pickled in C): per process its rows' keys, out rows, token counts, tokens
        by_proc: dict[MatcherProcess, tuple[list, list, list, list]] = {}
        # the learnt tokens' bit tests: rows whose last mask is `bits` (a step's rows share one), others
        bits, b_rows, b_toks, b_ms, other = None, [], [], [], []
        for j, m in enumerate(rows):
            toks = m._tokens
            c = len(toks)
            if learnt is not None and learnt[j] >= 0:
                tok = learnt[j]
                if known[j] - 1 == c:
                    last = m.last
                    if last is not None and last[2] == c:
                        if bits is None:
                            bits = last[0]
                        if last[0] is bits:
                            b_rows.append(last[1])
                            b_toks.append(tok)
                            b_ms.append(m)
                        else:
                            other.append((last[0], last[1], tok, m))
                    toks.append(tok)
                    c += 1
                else:
                    m.sync(known[j] - 1, tok)       # (learnt before: a comparison)
                    c = len(toks)
            if known is not None and c != known[j]:
                raise ValueError(f"row {j}: its matcher has seen {c} tokens, the output {known[j]}")
            sent = m._sent
            part = by_proc.get(m.proc)
            if part is None:
                part = by_proc[m.proc] = ([], [], [], [])
            part[0].append(m.key)
            part[1].append(j)
            part[2].append(c - sent)
            if c - sent == 1:
                part[3].append(toks[-1])
            elif c > sent:
                part[3].extend(toks[sent:])
            m._sent = c
        counts = list(known) if known is not None else [len(m._tokens) for m in rows]
        if b_ms:
            check_learnt(bits, b_rows, b_toks, b_ms)
        for b, row, tok, m in other:
            check_learnt(b, [row], [tok], [m])
        parts = {}
        for proc, (keys, outs, ntok, tokens) in by_proc.items():
            if proc.dead is not None:
                continue
            drops = [proc.drops.popleft() for _ in range(len(proc.drops))]
            frame = ("step", n, shm.name, shm.size, offset, words, keys, outs, ntok, tokens, proc.new, drops)
            proc.new = []
            try:
                proc.send(frame)
            except (PeerGone, OSError):
                proc.fail(proc.exit_reason())
                continue
            parts[proc] = outs
        ticket = Ticket(n, shm, offset, words, rows, parts, counts)
        self._slots[n % 2] = ticket
        return ticket

    def collect(self, ticket: Ticket, bits: np.ndarray) -> list[bool]:
        """Wait for `ticket`'s replies; its rows' bits into `bits` (uint32 [rows, words]); per row, ok."""
        rows = ticket.rows
        ok = [False] * len(rows)
        slowest = [0.0, 0.0]
        with ticket.lock:
            if ticket.abandoned:
                raise RuntimeError(f"mask step {ticket.n} was given up: a later step reused its memory")
            ticket.claimed = True
        try:
            for proc, js in ticket.parts.items():
                reply = self._reply(proc, ticket.n)
                if reply is None:
                    continue
                _, _, flags, errors, consume_s, fill_s = reply
                for i, j in enumerate(js):
                    ok[j] = bool(flags[i])
                for i, why in errors:
                    m = rows[js[i]]
                    m.refuse(ticket.counts[js[i]] - 1, why)
                slowest = [max(slowest[0], consume_s), max(slowest[1], fill_s)]
            view = np.ndarray((len(rows), ticket.words), np.uint32, buffer=ticket.shm.buf, offset=ticket.offset)
            np.copyto(bits, view)
            del view
            for j, good in enumerate(ok):
                if not good:
                    bits[j] = np.uint32(0xFFFFFFFF)
            for j, m in enumerate(rows):
                m.last = (bits, j, ticket.counts[j])
            self.consume_s += slowest[0]
            self.fill_s += slowest[1]
            self.steps += 1
        finally:
            ticket.collected.set()
        return ok

    def _reply(self, proc: MatcherProcess, n: int):
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                reply = read_frame(proc.rep, deadline)
                if reply[1] == n:
                    return reply
                # (an older step's reply nobody collected: its mask was dropped)
        except PeerGone:
            proc.fail(proc.exit_reason())
        except TimeoutError:
            proc.fail(f"matcher process {proc.index} (pid {proc.pid}) did not answer within "
                      f"{self.timeout_s:g} s: killed")
        except OSError as exc:
            proc.fail(f"matcher process {proc.index} (pid {proc.pid}): {exc}")
        return None

    def _segment(self, rows: int, words: int) -> Segment:
        """The current segment, or a larger one (the older stays mapped, for a step in flight, until close)."""
        if rows > self._cap or words != self._words:
            cap = max(64, rows, 2 * self._cap if words == self._words else 0)
            self._segments.append(Segment(2 * cap * words * 4))
            self._cap, self._words = cap, words
        return self._segments[-1]

    def segment_names(self) -> list[str]:
        return [s.name for s in self._segments]

    def close(self) -> None:
        self.closed = True
        self._final()


def _forget(proc: MatcherProcess, key: int) -> None:
    """A row's sequence is gone: its process drops its matcher with the next frame."""
    proc.keys.discard(key)
    proc.drops.append(key)
