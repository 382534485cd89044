"""Instruments of ops.bench.structured: host clocks on the engine's methods, the all-allowed constraint,
and the per-step breakdown table (kernels/cuda/step_timing.py) of each run.

``AllAllowed`` runs the constrained code path (a matcher per row, the late mask, the mask worker, the mask
upload, the masked sampling kernel) with a mask that allows every token but EOS (so that its rows, like
the json_schema ones, decode the whole budget) and no llguidance at all: json_schema minus all_allowed is
llguidance's share of a step; all_allowed minus plain is the device's and the plumbing's.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np


class AllowAllMatcher:
    """aotx.structured.RowMatcher's interface, every token allowed (the mask is filled by MaskClock)."""
    failed, error, accepting, all_allowed = False, "", True, True

    def __init__(self) -> None:
        self.consumed = 0

    def consume(self, token_id: int) -> bool:
        self.consumed += 1
        return True

    def sync(self, index: int, token_id: int) -> bool:
        if index < self.consumed:
            return True
        if index > self.consumed:
            raise ValueError(f"token {index} skips {index - self.consumed} the matcher has not seen")
        return self.consume(token_id)


class AllAllowed:
    kind, digest = "all_allowed", "all_allowed"

    def __init__(self, vocab_size: int, eos: int) -> None:
        self.vocab_size, self.eos = vocab_size, eos

    def start(self) -> AllowAllMatcher:
        return AllowAllMatcher()


class MaskClock:
    """Host time spent filling bitmasks (aotx.structured.batch.fill_rows and fill_pairs), for the report; rows of
    AllowAllMatcher get every bit but EOS's, without llguidance."""

    def __init__(self, eos: int) -> None:
        from aotx.structured import batch
        self.calls, self.rows, self.seconds, self._fill, self.eos = 0, 0, 0.0, batch.fill_rows, eos
        batch.fill_rows = self
        real_pairs = getattr(batch, "fill_pairs", None)   # (the mask worker's fill of llguidance rows: masks)
        if real_pairs is None:          # (an older tree: fill_rows only)
            return

        def fill_pairs(pairs, bits, lls) -> None:
            start = time.perf_counter()
            real_pairs(pairs, bits, lls)
            self.seconds += time.perf_counter() - start
            self.calls += 1
            self.rows += len(pairs)

        batch.fill_pairs = fill_pairs

    def __call__(self, matchers, bits) -> None:
        start = time.perf_counter()
        if matchers and getattr(matchers[0], "all_allowed", False):
            bits.fill(np.uint32(0xFFFFFFFF))
            bits[:, self.eos // 32] &= np.uint32(~(1 << (self.eos % 32)) & 0xFFFFFFFF)
        else:
            self._fill(matchers, bits)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.rows += len(matchers)

    def snapshot(self) -> tuple[int, int, float]:
        return self.calls, self.rows, self.seconds


class Timed:
    """Time spent in one method (on whatever thread calls it), for the report."""

    def __init__(self, cls, name: str) -> None:
        self.calls, self.seconds, real = 0, 0.0, getattr(cls, name)
        clock = self

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                clock.seconds += time.perf_counter() - start
                clock.calls += 1

        setattr(cls, name, timed)

    def per_call_ms(self) -> float:
        return 1e3 * self.seconds / max(self.calls, 1)

    def snapshot(self) -> tuple[int, float]:
        return self.calls, self.seconds


class HostClocks:
    """The engine thread's time per step in its parts, per run (snapshots around each run)."""

    def __init__(self) -> None:
        from aotx.engine.engine import Engine
        self.clocks = {"engine complete (ids wait, consume, deliver)": Timed(Engine, "_complete"),
                       "engine launch (schedule, build, launch)": Timed(Engine, "_launch")}
        self._at: dict[str, tuple[int, float]] = {}

    def start(self) -> None:
        self._at = {k: c.snapshot() for k, c in self.clocks.items()}

    def launches(self) -> int:
        """Engine._launch calls (steps) since start()."""
        return self.clocks["engine launch (schedule, build, launch)"].calls - \
            self._at.get("engine launch (schedule, build, launch)", (0, 0.0))[0]

    def since(self) -> dict[str, float]:
        """ms per call of each clock since start()."""
        out = {}
        for k, c in self.clocks.items():
            n0, s0 = self._at.get(k, (0, 0.0))
            n, s = c.snapshot()
            out[k] = 1e3 * (s - s0) / max(n - n0, 1)
        return out


def breakdown_table(rows: list[tuple[str, dict, dict]]) -> str:
    """Markdown: per run (name, launcher breakdown summary, host clocks ms), the step's parts."""
    head = ("| run | steps | rows/step | launch→launch ms | device: forward | wait for sampling | sample | "
            "gap | busy share | host: fwd→sampling enqueued | in launch() | ids() wait | "
            "engine complete | engine launch | sampling enqueued on |")
    lines = [head, "|" + "|".join(["---"] + ["---:"] * 13 + ["---"]) + "|"]
    for name, b, host in rows:
        if not b:
            continue

        def f(k):
            mean, p50, p90, _ = b[k]
            return f"{mean:.3f} ({p50:.3f}/{p90:.3f})"
        on = ", ".join(f"{t or '?'} {n}" for t, n in sorted(b["sampled_on"].items()))
        h = list(host.values())
        lines.append(f"| {name} | {b['forward'][3]} | {b.get('rows_per_step', float('nan')):.1f} | {f('period')} | "
                     f"{f('forward')} | {f('wait')} | {f('sample')} | {f('gap')} | {b['busy_share']:.2f} | "
                     f"{f('defer')} | {f('launch')} | {f('ids_wait')} | {h[0]:.3f} | {h[1]:.3f} | {on} |")
    return "\n".join(lines) + "\n\n(ms a step: mean (p50/p90); device figures from CUDA events, host ones from " \
        "the host clock; busy share = (forward + sample) / (forward + wait + sample + gap))"


class MaskTimes:
    """The chain of each worker-filled mask (aotx.engine.masks.LateMask), on the host clock: the engine
    thread's consume of the step before's tokens, the hand-over to the worker, the fill (llguidance, and
    the GIL it waits for), and what follows the fill on the worker (its sampling enqueued: the ready
    callbacks). Per run: reset() before, summary() after."""

    def __init__(self) -> None:
        from aotx.engine import masks
        self._stamps: dict[int, dict[str, float]] = {}
        self.done: list[dict[str, float]] = []
        stamps = self._stamps
        real_consume, real_run, real_fill = masks.LateMask.consume, masks.LateMask.run, masks.LateMask._fill

        def consume(mask):
            s = stamps.setdefault(id(mask), {})
            s.setdefault("consume0", time.perf_counter())
            real_consume(mask)
            s.setdefault("consume1", time.perf_counter())

        def fill(mask, ok):
            stamps.setdefault(id(mask), {})["fill0"] = time.perf_counter()
            try:
                return real_fill(mask, ok)
            finally:
                stamps[id(mask)]["fill1"] = time.perf_counter()

        def run(mask):
            s = stamps.setdefault(id(mask), {})
            s["run0"] = time.perf_counter()
            real_run(mask)
            s["run1"] = time.perf_counter()
            if mask.deferred:
                self.done.append(stamps.pop(id(mask)))
            else:
                stamps.pop(id(mask), None)

        masks.LateMask.consume, masks.LateMask.run, masks.LateMask._fill = consume, run, fill
        from aotx.engine.mask_worker import MaskWorker
        real_submit = MaskWorker._submit

        def submit(worker, mask):       # the hand-over: the worker consumes after it (MaskWorker.consumes)
            stamps.setdefault(id(mask), {})["submit"] = time.perf_counter()
            real_submit(worker, mask)

        MaskWorker._submit = submit
        from aotx.engine import mask_procs      # its fill is the wait for the matcher processes' bits
        real_proc_fill = mask_procs.ProcLateMask._fill

        def proc_fill(mask, ok):
            stamps.setdefault(id(mask), {})["fill0"] = time.perf_counter()
            try:
                return real_proc_fill(mask, ok)
            finally:
                stamps[id(mask)]["fill1"] = time.perf_counter()

        mask_procs.ProcLateMask._fill = proc_fill

    def reset(self) -> None:
        self.done = []

    def summary(self) -> dict[str, float]:
        """ms per mask, mean: consume (on the engine thread before the hand-over, or on the worker after it:
        MaskWorker.consumes), hand-over (handed to the worker's start), fill, after the fill (the sampling's
        enqueue on the worker), and the whole chain (the first of consume and hand-over to that)."""
        parts = {"consume": ("consume0", "consume1"), "hand-over": ("submit", "run0"), "fill": ("fill0", "fill1"),
                 "after fill": ("fill1", "run1"), "chain": ("start", "run1")}
        out = {}
        for s in self.done:
            if "consume0" in s or "submit" in s:
                s["start"] = min(s.get("consume0", float("inf")), s.get("submit", float("inf")))
        for name, (a, b) in parts.items():
            v = [1e3 * (s[b] - s[a]) for s in self.done if a in s and b in s]
            out[name] = sum(v) / len(v) if v else float("nan")
        out["masks"] = len(self.done)
        return out


def mask_chain_table(rows: list[tuple[str, dict]]) -> str:
    lines = ["| run | masks | consume (engine thread, or worker) | hand-over to the worker | fill | after the fill "
             "(sampling enqueued, or its gate opened) | chain: consume or hand-over to sampling enqueued |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, m in rows:
        if m and m.get("masks"):
            lines.append(f"| {name} | {m['masks']} | {m['consume']:.3f} | {m['hand-over']:.3f} | {m['fill']:.3f} | "
                         f"{m['after fill']:.3f} | {m['chain']:.3f} |")
    return "\n".join(lines) + "\n\n(ms a mask, mean, host clock; masks filled on the mask worker only)"


class ThreadCpu:
    """CPU time of this process's threads by name (/proc/self/task/*/schedstat, ns): what each thread costs,
    independent of how busy the box is (wall clocks on a loaded 2-core box are not). snapshot() before and
    after a run; per_step(a, b, steps) gives ms of CPU a step by thread name (threads of one name summed)."""

    @staticmethod
    def snapshot() -> dict[int, tuple[str, int]]:
        names = {t.native_id: t.name for t in threading.enumerate()}
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except OSError:     # (a thread that ended meanwhile)
                continue
            name = names.get(int(tid)) or f"other ({comm})"
            out[int(tid)] = ("main (event loop)" if int(tid) == os.getpid() else name, ns)
        return out

    @staticmethod
    def per_step(before: dict, after: dict, steps: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for tid, (name, ns) in after.items():
            got = ns - before.get(tid, (name, 0))[1]
            out[name] = out.get(name, 0.0) + got / 1e6 / max(steps, 1)
        return out


class WaitCpu:
    """CPU time each thread spends inside the device waits (kernels.cuda.driver.Event.synchronize: with the
    driver's default scheduling a wait spins on a host with more CPUs than contexts, and holds no GIL), by
    thread name: a thread's CPU less this is its work, most of it GIL-held Python (ThreadCpu). A no-op where
    the CUDA driver module cannot be imported."""

    def __init__(self) -> None:
        self.by: dict[str, float] = {}
        try:
            from kernels.cuda import driver
        except Exception:       # (no cuda-python here: nothing spins)
            return
        real, by = driver.Event.synchronize, self.by

        def synchronize(event):
            c0 = time.thread_time()
            try:
                return real(event)
            finally:
                name = threading.current_thread().name
                by[name] = by.get(name, 0.0) + time.thread_time() - c0

        driver.Event.synchronize = synchronize

    def snapshot(self) -> dict[str, float]:
        return dict(self.by)


def thread_cpu_table(rows: list[tuple[str, float, dict, dict, int]]) -> str:
    """Markdown: per run (name, launch->launch wall ms a step, ThreadCpu ms a step by thread, WaitCpu ms a step
    by thread, steps), each thread's CPU a step, the device waits' share taken out, and the engine thread's and
    mask worker's work together beside the step's wall."""
    names = ("aotx-engine", "aotx-mask-fill", "main (event loop)")
    head = ("| run | steps | launch→launch ms | " + " | ".join(f"{n}: CPU (in device waits)" for n in names)
            + " | other threads' CPU | engine + worker CPU less waits | ÷ step |")
    lines = [head, "|" + "|".join(["---"] + ["---:"] * (len(names) + 5)) + "|"]
    for name, wall, cpu, waits, steps in rows:
        if not cpu:
            continue
        cells = [f"{cpu.get(n, 0.0):.3f} ({waits.get(n, 0.0):.3f})" for n in names]
        other = sum(v for k, v in cpu.items() if k not in names)
        work = sum(cpu.get(n, 0.0) - waits.get(n, 0.0) for n in names[:2])
        lines.append(f"| {name} | {steps} | {wall:.3f} | " + " | ".join(cells) + f" | {other:.3f} | {work:.3f} | "
                     f"{work / wall if wall == wall and wall > 0 else float('nan'):.2f} |")
    return "\n".join(lines) + ("\n\n(ms a step, mean over the run: each thread's CPU from /proc/self/task/*/schedstat "
                               "÷ the engine's launches; in brackets the CPU it spent inside Event.synchronize, "
                               "spinning for the device without the GIL; what is left of the engine thread's and the "
                               "mask worker's is their work, nearly all of it GIL-held Python: if it is about the "
                               "step's wall, the GIL bounds the step. Other threads: llguidance's pool (its threads "
                               "spin between calls), the device's, the driver's)")
