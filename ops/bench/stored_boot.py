"""Benchmark (not a test): boot replay of a journal holding `--responses` stored responses.

    .venv/bin/python -m ops.bench.stored_boot [--responses 10000] [--identities 64] [--events 24]
                                              [--event-bytes 160] [--concurrency 512]

One embedded nats-server (file storage, sync_interval always), one SharedRuntime. The log is written
through the runtime's own stored port (`runtime.stored.record`: decide, group commit, ticks), as the
Responses surface writes it: per response a CreateResponse (one input message), one
AppendResponseEvents of `--events` stream events of `--event-bytes` bytes, and a FinishResponse
(one output message), for `--identities` owners, `--concurrency` responses in flight at once. Then a
second SharedRuntime boots from the log (full replay, no snapshot) and its state hash is checked
against the writer's; then boots from a snapshot (format 2: the stored state included) covering the
whole log (tail 0) and one `DEFAULT_EVERY` − 1 messages behind the end (the worst case of the default
`--snapshot-every`), each checked the same way. Prints the write rate, the journal's size, and the
boot times (target on the H200 machine: ≤ 2 s for 10,000 responses).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from aotx.projection import Projector
from aotx.runtime import SharedRuntime
from aotx.snapshot import DEFAULT_EVERY, SnapshotPolicy, SnapshotStore, encode_snapshot
from aotx.state import Capacities
from aotx.stored import (AppendResponseEvents, CreateResponse, FinishResponse, ResponseStatus, Saved,
                         StoredLimits, identity_of_key)
from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec


def _item(prefix: str, n: int, role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"id": f"{prefix}_{n:048x}", "type": "message", "role": role, "content": [{"type": kind, "text": text}]}


async def write_one(runtime: SharedRuntime, identity: str, n: int, events: int, event_bytes: int) -> None:
    rid = f"resp_{n:048x}"
    commands = (CreateResponse(rid, 1_800_000_000 + n, "smollm2-135m-instruct",
                               [_item("msg", 2 * n, "user", f"question {n}")], background=True,
                               params={"temperature": 0}),
                AppendResponseEvents(rid, 0, [b"x" * event_bytes] * events),
                FinishResponse(rid, ResponseStatus.COMPLETED, [_item("msg", 2 * n + 1, "assistant", f"answer {n}")],
                               usage={"input_tokens": 8, "output_tokens": events}))
    for command in commands:
        out = await runtime.stored.record(identity, command)
        assert isinstance(out, Saved), (command, out)


async def bench(args, tmp: Path) -> None:
    spec = StreamSpec(name="BENCHSTORED", subject_prefix="bs.j")
    limits = StoredLimits(responses=max(65536, args.responses))
    identities = [identity_of_key(f"bench-key-{i}") for i in range(args.identities)]
    print(f"stored boot benchmark: {args.responses} responses × ({args.events} events of {args.event_bytes} "
          f"bytes), {args.identities} identities; pid {os.getpid()}; load average {os.getloadavg()[0]:.2f} at start",
          flush=True)
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()
        writer = await SharedRuntime(url, spec, progress=False, nats_auth=auth, stored_limits=limits).start()
        try:
            t = time.perf_counter()
            todo = iter(range(args.responses))

            async def worker() -> None:
                for n in todo:
                    await write_one(writer, identities[n % len(identities)], n, args.events, args.event_bytes)

            await asyncio.gather(*(worker() for _ in range(min(args.concurrency, args.responses))))
            wrote = time.perf_counter() - t
            reference = writer.state_hash()
            info = await writer.recorder.stream_info()
        finally:
            await writer.stop()
        print(f"  wrote {args.responses} stored responses in {wrote:.1f} s ({args.responses / wrote:.0f}/s): "
              f"{info.messages} journal messages, {info.bytes} bytes", flush=True)

        t = time.perf_counter()
        booted = await SharedRuntime(url, spec, progress=False, nats_auth=auth, stored_limits=limits).start()
        boot_s = time.perf_counter() - t
        try:
            assert booted.state_hash() == reference, "the replayed state differs from the written one"
            assert booted.projector.stored.totals.responses == args.responses
        finally:
            await booted.stop()
        print(f"  boot (full replay): {boot_s:.2f} s ({info.messages / boot_s:.0f} msg/s); state hash = the writer's",
              flush=True)
        await snapshot_boots(url, auth, spec, limits, booted.projector.incarnation, reference)


def _whole_cut(spec: StreamSpec, incarnation, messages, cut: int) -> int:
    """The last position at or before `cut` where no transfer is open (a snapshot can be taken only
    there): the tail booted from it is at least as long as asked."""
    p, safe = Projector(spec.name, incarnation, Capacities()), 0
    for m in messages:
        if m[1] > cut:
            break
        p.feed_many([m])
        if not p.reassembler.open_transfers:
            safe = m[1]
    return safe


async def snapshot_boots(url, auth, spec: StreamSpec, limits: StoredLimits, incarnation, reference: str) -> None:
    """Boot from a snapshot at the end of the log, and from one DEFAULT_EVERY - 1 messages before it."""
    rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=60.0)
    messages = [(m.subject, m.seq, m.data) async for m in rec.read(1)]
    await rec.close()
    last = messages[-1][1]
    store = await SnapshotStore.connect(url, spec.name, auth=auth, timeout=60.0)
    try:
        for cut, what in ((last, "tail 0"),
                          (last - (DEFAULT_EVERY - 1), f"tail {DEFAULT_EVERY - 1}, the worst case of "
                                                       f"--snapshot-every {DEFAULT_EVERY}")):
            cut = _whole_cut(spec, incarnation, messages, cut)
            prefix = Projector(spec.name, incarnation, Capacities())
            prefix.feed_many([m for m in messages if m[1] <= cut])
            for entry in await store.listing():
                await store.bucket.remove(entry.name)
            await store.save(encode_snapshot(prefix), spec.name, incarnation, cut)
            t = time.perf_counter()
            rt = await SharedRuntime(url, spec, progress=False, nats_auth=auth, stored_limits=limits,
                                     snapshots=SnapshotPolicy(every=10 ** 9)).start()
            boot_s = time.perf_counter() - t
            try:
                assert rt.snapshots.stats.booted_from == cut, (rt.snapshots.stats, cut)
                assert rt.state_hash() == reference, "the snapshot boot's state differs from the written one"
            finally:
                await rt.stop()
            print(f"  boot from a snapshot ({what}; {last - cut} messages replayed after it): {boot_s:.2f} s; "
                  "state hash = the writer's", flush=True)
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--responses", type=int, default=10_000)
    ap.add_argument("--identities", type=int, default=64)
    ap.add_argument("--events", type=int, default=24, help="stream events saved per response")
    ap.add_argument("--event-bytes", type=int, default=160)
    ap.add_argument("--concurrency", type=int, default=512, help="responses written at once")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aotx-stored-boot-") as tmp:
        asyncio.run(bench(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
