"""A constrained step's sampling enqueued by the mask worker after the fill, against enqueued at the launch
behind a gate the worker opens (kernels/cuda/mask_gate.py): the device's wait and sampling times, with
the engine thread busy in Python meanwhile (or idle: the peer). No model weights.

    python3 -m ops.gpu.mask_gate_bench [--rows 64] [--steps 200] [--fill-us 800] [--busy-us 1800]

Per step, on the one stream: a stand-in forward (a device copy sized to ``--forward-ms``), then the
sampling of ``--rows`` rows of model-like logits through a fresh story-like mask (95 % of the vocab
allowed, EOS not). The "engine" thread enqueues the forward, hands the step to the "mask worker", spends
``--busy-us`` in a Python loop (its delivery, scheduling and build), then reads the step's ids back. The
worker sleeps ``--fill-us`` (llguidance's fill holds no GIL), writes the bits into page-locked memory and
then either enqueues the sampling itself (``worker``: ~8 driver calls, each one releasing the GIL) or
opens the step's gate with one store (``gate``: the sampling was enqueued at the launch). Prints per way:
device forward, wait for the sampling, sampling, and host: fill end to sampling enqueued / gate opened;
and whether both ways drew the same ids (they must: same logits, masks, seeds).
"""
from __future__ import annotations

import argparse
import queue
import statistics
import sys
import threading
import time

import numpy as np

from kernels.cuda import driver
from kernels.cuda.mask_gate import available
from ops.gpu.kernel_check import V, Ctx
from ops.gpu.sampling_bench import _pack_words, model_like_logits

EOS = 2


def _busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    x = 0
    while time.perf_counter() < end:
        for i in range(50):
            x += i


def run_way(c: Ctx, way: str, args, logits_ptr: int, masks: list[np.ndarray], params: dict, busy: bool) -> dict:
    s = c.dev.stream
    rows, words = args.rows, V // 32
    fwd_src, fwd_dst, fwd_bytes = params["fwd"]
    pinned_bits = [driver.Pinned(rows * words * 4) for _ in range(2)]
    pinned_par = driver.Pinned(params["host"].nbytes)
    ids_host = driver.Pinned(rows * 4 * args.steps + 64)
    dev_bits, dev_row, dev_par, out = (driver.Buffer(rows * words * 4), driver.Buffer(rows * 4),
                                       driver.Buffer(params["host"].nbytes), driver.Buffer(rows * 4))
    par = params["host"]
    pinned_par.view(np.uint8, par.nbytes)[:] = par.view(np.uint8)
    driver.htod_pinned(dev_par.ptr, pinned_par.ptr, par.nbytes, s)     # every step's `step` values, once
    c.dev.synchronize()
    gate = available(s) if way == "gate" else None
    if way == "gate" and gate is None:
        raise SystemExit("this device takes no stream waits on host memory")
    ev = [[driver.Event(timing=True) for _ in range(4)] for _ in range(args.steps)]
    t_fill_end = [0.0] * args.steps
    t_go = [0.0] * args.steps
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    enqueued = [threading.Event() for _ in range(args.steps)]

    def sampling(k: int, wait_value: int | None) -> None:
        """The step's sampling, as the backend enqueues it (kernels/cuda/backend.py sample_enqueue)."""
        base = dev_par.ptr
        driver.htod_pinned(base, pinned_par.ptr, params["step"], s)
        driver.htod_pinned(dev_row.ptr, pinned_par.ptr + params["row_off"], rows * 4, s)
        if wait_value is not None:
            gate.word.wait(s, wait_value)
        ev[k][2].record(s)
        driver.htod_pinned(dev_bits.ptr, pinned_bits[k % 2].ptr, rows * words * 4, s)
        c.k.sample(logits_ptr, base + params["idx"], V, base + params["temp"], base + params["top_p"],
                   base + params["top_k"], base + params["seed"], base + params["step"] + 8 * rows * k,
                   base + params["min_p"], base + params["adj"], 0, out.ptr, rows, dev_bits.ptr, dev_row.ptr, words)
        driver.dtoh_async(ids_host.ptr + 4 * rows * k, out.ptr, rows * 4, s)
        ev[k][3].record(s)

    def worker() -> None:
        while (k := jobs.get()) is not None:
            time.sleep(args.fill_us / 1e6)             # the fill: GIL released
            pinned_bits[k % 2].view(np.uint32, rows * words)[:] = masks[k % len(masks)].ravel()
            t_fill_end[k] = time.perf_counter()
            if gate is not None:
                gate.word.open(k + 1)
            else:
                c.dev.make_current()
                sampling(k, None)
            t_go[k] = time.perf_counter()
            enqueued[k].set()

    th = threading.Thread(target=worker, name="mask-worker")
    th.start()
    c.dev.make_current()
    for k in range(args.steps):
        if k >= 1 and gate is None:
            enqueued[k - 1].wait()          # this forward reads the step before's ids (the launcher's _await_worker)
        if k >= 2:
            ev[k - 2][3].synchronize()      # the buffer of step k is free (the one before's before)
        ev[k][0].record(s)
        driver.dtod(fwd_dst, fwd_src, fwd_bytes, s)     # the forward
        ev[k][1].record(s)
        if gate is not None:
            sampling(k, k + 1)
        jobs.put(k)
        if busy:
            _busy(args.busy_us)
        else:
            time.sleep(args.busy_us / 1e6)
        if k >= 1:
            ev[k - 1][3].synchronize()      # read the step before back
    jobs.put(None)
    th.join()
    c.dev.synchronize()
    skip = 5
    fwd = [ev[k][1].since(ev[k][0]) for k in range(skip, args.steps)]
    wait = [ev[k][2].since(ev[k][1]) for k in range(skip, args.steps)]
    samp = [ev[k][3].since(ev[k][2]) for k in range(skip, args.steps)]
    period = [ev[k][0].since(ev[k - 1][0]) for k in range(skip, args.steps)]
    go = [1e3 * (t_go[k] - t_fill_end[k]) for k in range(skip, args.steps)]
    ids = ids_host.view(np.int32, rows * args.steps).reshape(args.steps, rows).copy()
    for b in pinned_bits + [pinned_par, ids_host]:
        b.free()
    for b in (dev_bits, dev_row, dev_par, out):
        b.free()
    if gate is not None:
        gate.free()
    return {"fwd": statistics.mean(fwd), "wait": statistics.mean(wait), "sample": statistics.mean(samp),
            "period": statistics.mean(period), "go": statistics.mean(go), "ids": ids}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--fill-us", type=float, default=800.0)
    ap.add_argument("--busy-us", type=float, default=1800.0)
    ap.add_argument("--forward-ms", type=float, default=1.9)
    ap.add_argument("--switch-s", type=float, default=0.00005)
    args = ap.parse_args(argv)
    sys.setswitchinterval(args.switch_s)
    c = Ctx()
    rows = args.rows
    logits_ptr = c.up(model_like_logits(c.rng, rows))
    masks = []
    for _ in range(16):                    # story-like: 95 % of the vocab allowed, EOS not
        allowed = c.rng.random((rows, V)) < 0.95
        allowed[:, EOS] = False
        masks.append(_pack_words(allowed))
    # the sampling parameters as one upload: idx, temp, top_p, top_k, min_p, adj, seed, row map; then each step's steps
    n = rows
    sec = {"idx": np.arange(n, dtype=np.int32), "temp": np.full(n, 0.7, np.float32),
           "top_p": np.ones(n, np.float32), "top_k": np.zeros(n, np.int32), "min_p": np.zeros(n, np.float32),
           "adj": np.full(n, -1, np.int32), "seed": np.arange(n, dtype=np.uint64) * 7919,
           "row": np.arange(n, dtype=np.int32)}
    layout, off = {}, 0
    for name, a in sec.items():
        layout[name] = off
        off = -(-(off + a.nbytes) // 8) * 8
    layout["step"] = off
    steps = (np.arange(args.steps, dtype=np.uint64)[:, None] + np.zeros(n, np.uint64)).ravel()
    host = np.zeros(off + steps.nbytes, np.uint8)
    for name, a in sec.items():
        host[layout[name]:layout[name] + a.nbytes] = a.view(np.uint8)
    host[off:] = steps.view(np.uint8)
    fwd_bytes = int(args.forward_ms * 1e-3 * 4.0e12 / 2)     # a device copy reads and writes: ~2 bytes a byte
    src, dst = driver.Buffer(fwd_bytes), driver.Buffer(fwd_bytes)
    params = {"host": host, "fwd": (src.ptr, dst.ptr, fwd_bytes), "row_off": layout["row"], **layout}
    print(f"## mask gate: {rows} rows, {args.steps} steps, fill {args.fill_us:.0f} µs, engine thread "
          f"{args.busy_us:.0f} µs a step, switch interval {args.switch_s * 1e6:.0f} µs ({c.dev.name})\n")
    print("| way | engine thread | step ms | device: forward | wait for sampling | sample | "
          "host: fill end → enqueued / opened |")
    print("|---|---|---:|---:|---:|---:|---:|")
    ids = {}
    for busy in (False, True):
        for way in ("worker", "gate"):
            r = run_way(c, way, args, logits_ptr, masks, params, busy)
            ids[(way, busy)] = r["ids"]
            print(f"| {way} | {'busy in Python' if busy else 'asleep'} | {r['period']:.3f} | {r['fwd']:.3f} | "
                  f"{r['wait']:.3f} | {r['sample']:.3f} | {r['go']:.3f} |", flush=True)
    same = all(np.array_equal(ids[("worker", False)], v) for v in ids.values())
    print(f"\nids: every way == worker/asleep: {same}")
    src.free()
    dst.free()
    c.free()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
