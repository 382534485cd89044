"""Benchmark (not a test): where the runtime's CPU goes per durable mutation, by stage, with raw publish's
CPU per message as the peer measured in the same run.

    .venv/bin/python -m ops.bench.mutation_profile [--n 8000] [--clients 8] [--interval-ms 1]

One embedded nats-server (file storage, sync_interval always) and one runtime with the load of
ops.bench.mutations (each client a participant toggling another's rights in its own space, a retirement
every 64th sequence). First raw `js.publish` with `--clients` in flight (817-byte messages), then the
same messages through the journal's own append path alone (eventlog `JetStreamRecorder.append`: acks on
one inbox, eventlog.publish; no runtime), then the runtime's `--clients` participants; for each, the CPU of
this process and of nats-server per mutation (and nats-server's read system calls and thread runs per
message: ops.bench.publish_factors `server_counts`), and the runtime's ratios to both peers.
The runtime run is sampled with a CPU-time timer (ITIMER_PROF: py-spy is not in the venv) and each sample
goes to the stage of its innermost frame that names one (STAGES, from the leaf up); the
shares are of this process's CPU, so "µs" = share × its CPU per mutation. The kernel's timer ticks every
4 ms here whatever the interval asked, so --n 8000 gives ~1,000 samples: a stage under ~1 % is noise.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import secrets
import signal
import tempfile
import time
from pathlib import Path

from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec
from ops.bench.mutations import concurrent
from api.server import run_serving
from ops.bench.pipeline_ab import runtime_and_raw
from ops.bench.publish_factors import server_counts
from ops.proc_cpu import cpu_seconds

# (stage, substrings of a frame's "file:function"), matched from the innermost frame outwards
STAGES = (
    ("client: the bench's request bodies", ("ops/bench/mutations.py:next_member",)),
    ("parse the body (port.parse_submission)", ("runtime/port.py:parse_submission",)),
    ("decide", ("state/decide.py:decide",)),
    ("answer (receipt JSON)", ("runtime/planner.py:accepted_answer",)),
    ("plan the round, other (planner)", ("runtime/planner.py:",)),
    ("encode ticks: events (state codec)", ("state/codec.py:encode_event",)),
    ("encode ticks: framing (journal emitter)", ("runtime/ticks.py:encode_ticks",)),
    ("begin the round, other", ("runtime/command_round.py:begin_round", "command_round.py:_encode")),
    ("apply: the projector (state apply)", ("state/apply.py:",)),
    ("apply: the projector, other", ("projection/projector.py:feed",)),
    ("observers (change feed, executor)", ("runtime/observers.py:notify",)),
    ("early apply, other", ("runtime/early_apply.py:",)),
    ("append: eventlog + nats-py publish", ("eventlog/jetstream.py:append", "eventlog/jetstream.py:send_append",
                                            "eventlog/publish.py:")),
    ("the writer (append, feed), other", ("runtime/writer.py:", "runtime/write_order.py:")),
    ("the command loop, other", ("runtime/pipeline.py:", "runtime/command_round.py:", "runtime/runtime.py:submit")),
    ("nats-py: reading acks", ("nats/aio/client.py:_read_loop", "nats/aio/subscription.py", "nats/protocol/")),
    ("nats-py: flushing", ("nats/aio/client.py:_flusher",)),
    ("client: the bench's loop", ("ops/bench/mutations.py:worker",)),
    ("event loop: select and sockets", ("selectors.py:", "selector_events.py")),
)


class Sampler:
    """Counts the stage of the main thread's stack every `interval` seconds of process CPU time."""

    def __init__(self, interval: float) -> None:
        self.interval, self.counts = interval, collections.Counter()

    def _sample(self, _sig, frame) -> None:
        names = []
        while frame is not None:
            names.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")
            frame = frame.f_back
        stage = next((name for f in names for name, keys in STAGES if any(k in f for k in keys)), None)
        self.counts[stage or ("event loop, other" if any("asyncio" in f for f in names) else "other")] += 1

    def __enter__(self) -> "Sampler":
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        return self

    def __exit__(self, *_exc) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)


async def bench(n: int, clients: int, interval: float, tmp: Path) -> None:
    async with EmbeddedNats(tmp / "nats") as server:
        rt, nc, raw_pub, rt_op = await runtime_and_raw(server, clients)
        lean = await JetStreamRecorder.connect(server.url, StreamSpec(name="BENCHLEAN", subject_prefix="lean.j"),
                                               auth=server.auth())
        payload, counter = secrets.token_bytes(817), iter(range(1 << 30))

        async def lean_pub(c, i):   # the same message as raw_pub's, through the journal's append path
            await lean.append(f"lean.j.c{c}.tick", payload, msg_id=f"m{next(counter)}")
        await concurrent(clients, 50 // clients + 1, rt_op)   # warm
        await concurrent(clients, 50 // clients + 1, lean_pub)
        per, pid = n // clients * clients, server.pid or 0
        out = {}
        for mode, op in (("raw js.publish", raw_pub), ("lean append", lean_pub), ("runtime", rt_op)):
            c0, s0, k0 = time.process_time(), cpu_seconds(pid), server_counts(pid)
            if mode == "runtime":
                with Sampler(interval) as sampler:
                    wall, _ = await concurrent(clients, n // clients, op)
            else:
                wall, _ = await concurrent(clients, n // clients, op)
            k1 = server_counts(pid)
            out[mode] = (per / wall, (time.process_time() - c0) / per * 1e6, (cpu_seconds(pid) - s0) / per * 1e6,
                         (k1[0] - k0[0]) / per, (k1[2] - k0[2]) / per)
        for mode, (rate, mine, theirs, reads, runs) in out.items():
            print(f"  {mode:<16} {rate:7.0f}/s  CPU a mutation: this process {mine:4.0f} µs, nats-server {theirs:4.0f} µs "
                  f"(its reads {reads:.2f}, thread runs {runs:.2f} a message)")
        for peer in ("raw js.publish", "lean append"):
            (rate, mine, theirs, *_), (prate, pmine, ptheirs, *_) = out["runtime"], out[peer]
            print(f"  runtime ÷ {peer}: rate {rate / prate:.2f}×, CPU of this process {mine / pmine:.1f}×, "
                  f"(runtime + nats-server) ÷ (peer + nats-server) {(mine + theirs) / (pmine + ptheirs):.2f}×")
        total, mine = sum(sampler.counts.values()), out["runtime"][1]
        print(f"the runtime's CPU a mutation by stage ({total} samples):")
        for stage, count in sampler.counts.most_common():
            print(f"  {count / total * 100:5.1f} %  {count / total * mine:5.0f} µs  {stage}")
        await lean.close()
        await nc.close()
        await rt.stop()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m ops.bench.mutation_profile")
    p.add_argument("--n", type=int, default=8000, help="mutations per run (default 8000)")
    p.add_argument("--clients", type=int, default=8, help="concurrent participants / publishers (default 8)")
    p.add_argument("--interval-ms", type=float, default=1.0, help="sampling interval of CPU time (default 1)")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                   help="the event loop (default asyncio, as the figures before; uvloop is what `aotx serve` runs)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"event loop: {args.loop}")
        (run_serving if args.loop == "uvloop" else asyncio.run)(bench(args.n, args.clients, args.interval_ms / 1000, Path(tmp)))


if __name__ == "__main__":
    main()
