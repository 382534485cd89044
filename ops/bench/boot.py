"""Benchmark (not a test): boot of a long journal, full replay against a snapshot + tail.

    .venv/bin/python -m ops.bench.boot [--mutations 100000] [--lineages 64] [--every 2000,5000,10000]

One embedded nats-server (file storage, sync_interval always). The log is written directly with the
runtime's own encoders, not through the runtime (that would take minutes here): mutations decided by
the pure core (`decide`, applied with `apply_into` to the generator's state), one mutation per journal
message (one Emitter tick on its lineage's subject, a `runtime.boot` control record first, as the
runtime writes a lineage's first tick of a boot), appended with Nats-Msg-Id and the expected last
subject sequence, `--lineages` participants in parallel (each its own subject, in order). The
mutations: set-member toggles on each participant's own space and, every 12th sequence, a retirement
of everything below it (so the default 1,024-receipt table never fills).

Then, in the same run: a raw ordered-consumer read of the stream; boot's read alone (Recorder.read_batches,
no feed) and a follower's read (Recorder.subscribe from 1), CPU a message each; a full replay (`SharedRuntime.start()`,
no snapshots; with the CPU time of this process per message for both, which a loaded machine moves
less than the rates); the projector alone fed every message from memory (CPU µs a message: the replay's own
cost, without the read path); the snapshot of that state (encode, upload); `SharedRuntime.start()` from it (download +
decode, tail of 0); and for each `--every` N its worst case: the only snapshot N − 1 messages before the
end (list + download + decode + that tail). Every snapshot boot's state hash is checked against the full
replay's.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from aotx.journal import Emitter, TransferKind, lineage_hash
from aotx.runtime import SharedRuntime
from aotx.runtime.replay import TICK_KIND, Projector, boot_control_body
from aotx.snapshot import (DEFAULT_EVERY, SnapshotPolicy, SnapshotStore, covered_seq, decode_snapshot, encode_snapshot,
                           load_newest)
from aotx.state import (SCHEMA, Accepted, Actor, Capacities, Command, Grants, MutationKind, decide, empty_state,
                        encode_event, lineage_for, parse_mutation, receipt_json, state_hash, transfer_kind)
from aotx.state.apply import apply_into, owned_copy
from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec, connect

RETIRE_EVERY = 12   # a lineage holds ≤ 13 receipts: 64 lineages stay well inside the 1,024-receipt table
BOOT = "bench" + "0" * 27


class Generator:
    """Decisions of the pure core for `k` participants; each lineage's journal messages, in order."""

    def __init__(self, k: int, caps: Capacities) -> None:
        self.state = owned_copy(empty_state(caps))
        self.names = [f"bench-p{i}" for i in range(k)]
        self.seq = dict.fromkeys(self.names, 1)
        self.keys = iter(range(1, 1 << 62))
        self.emitters = {n: Emitter(lineage_hash(lineage_for(n))) for n in self.names}
        self.ticks: dict[str, list[bytes]] = {n: [] for n in self.names}
        self.space: dict[str, str] = {}
        self.pid: dict[str, str] = {}

    def _do(self, name: str, kind: MutationKind, space: str | None = None, **fields) -> dict:
        seq = self.seq[name]
        body = {"schema": SCHEMA, "lineage": lineage_for(name).hex(), "operation_key": f"{next(self.keys):032x}",
                "sequence": str(seq), **fields}
        decision = decide(self.state, Command(Actor(name, Grants.all()), parse_mutation(kind, body, space)))
        assert isinstance(decision, Accepted), decision
        em = self.emitters[name]
        if seq == 1:
            em.submit(TransferKind.CONTROL, boot_control_body(BOOT))
        for event in decision.events:
            apply_into(self.state, event)
            em.submit_payload(transfer_kind(event), encode_event(event))
        (tick,) = em.drain()
        self.ticks[name].append(tick.data)
        self.seq[name] = seq + 1
        return receipt_json(self.state, self.state.receipt_slot(lineage_for(name), seq))

    def setup(self) -> None:
        for n in self.names:
            self.pid[n] = self._do(n, MutationKind.REGISTER)["resource"]
        for n in self.names:
            self.space[n] = self._do(n, MutationKind.CREATE_SPACE, scope="private")["resource"]

    def mutation(self, i: int) -> None:
        name = self.names[i % len(self.names)]
        if self.seq[name] % RETIRE_EVERY == 0:
            self._do(name, MutationKind.RETIRE, retry_floor=str(self.seq[name]))
            return
        other = self.names[(i + 1) % len(self.names)]
        self._do(name, MutationKind.SET_MEMBER, self.space[name], participant=self.pid[other],
                 permissions=["read"] if (i // len(self.names)) % 2 else ["read", "write"])


async def write_log(url: str, auth, spec: StreamSpec, gen: Generator, setup_count: int) -> int:
    rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=30.0)
    last: dict[str, int] = {}

    async def append(name: str, data: bytes, i: int) -> None:
        subject = spec.subject(lineage_for(name).hex(), TICK_KIND)
        ack = await rec.append(subject, data, msg_id=f"{name}-{i}", expected_last_subject_seq=last.get(subject, 0))
        last[subject] = ack.seq

    try:
        for i in range(setup_count):   # registrations and spaces first: others' set-member rows name them
            for name in gen.names:
                await append(name, gen.ticks[name][i], i)

        async def lineage(name: str) -> None:
            for i, data in enumerate(gen.ticks[name][setup_count:], start=setup_count):
                await append(name, data, i)

        await asyncio.gather(*(lineage(n) for n in gen.names))
        return (await rec.stream_info()).last_seq
    finally:
        await rec.close()


async def raw_read(url: str, auth, spec: StreamSpec, total: int) -> float:
    nc = await connect(url, auth, name="bench-raw")
    js = nc.jetstream()
    got, done = 0, asyncio.Event()

    async def cb(msg):
        nonlocal got
        got += 1
        if got >= total:
            done.set()

    t = time.perf_counter()
    sub = await js.subscribe(f"{spec.subject_prefix}.>", stream=spec.name, ordered_consumer=True, cb=cb)
    await done.wait()
    wall = time.perf_counter() - t
    await sub.unsubscribe()
    await nc.close()
    return wall


async def read_alone(url: str, auth, spec: StreamSpec, total: int) -> tuple[float, float, float, float]:
    """(wall s, CPU µs a message) of boot's read of the whole stream without the feed (read_batches, or
    read where a recorder has no read_batches), then the same of a follower's read (subscribe from 1)."""
    rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=60.0)
    try:
        t, c, n = time.perf_counter(), time.process_time(), 0
        bulk = getattr(rec, "read_batches", None)
        if bulk is not None:
            async for messages in bulk(1):
                n += len(messages)
        else:
            async for _ in rec.read(1):
                n += 1
        read = (time.perf_counter() - t, (time.process_time() - c) / n * 1e6)
        assert n == total, (n, total)
        t, c = time.perf_counter(), time.process_time()
        sub = await rec.subscribe(1)
        try:
            async for m in sub:
                if m.seq >= total:
                    break
        finally:
            await sub.close()
        return read + (time.perf_counter() - t, (time.process_time() - c) / total * 1e6)
    finally:
        await rec.close()


async def timed_boot(url: str, auth, spec: StreamSpec, caps: Capacities,
                     snapshots: bool) -> tuple[float, SharedRuntime]:
    t = time.perf_counter()
    rt = SharedRuntime(url, spec, caps, progress=False, nats_auth=auth,
                       snapshots=SnapshotPolicy(every=10 ** 9) if snapshots else None)
    await rt.start()
    return time.perf_counter() - t, rt


async def bench(n: int, k: int, everies: list[int], tmp: Path) -> None:
    spec = StreamSpec(name="BENCHBOOT", subject_prefix="bb.j")
    caps = Capacities()
    print(f"boot benchmark: {n} mutations, {k} lineages, one mutation per journal message; pid {os.getpid()}; "
          f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    t = time.perf_counter()
    gen = Generator(k, caps)
    gen.setup()
    for i in range(n):
        gen.mutation(i)
    print(f"  generated {n + 2 * k} mutations (decide + apply + encode) in {time.perf_counter() - t:.1f} s", flush=True)
    async with EmbeddedNats(tmp / "nats") as server:
        url, auth = server.url, server.auth()
        t = time.perf_counter()
        last = await write_log(url, auth, spec, gen, 2)
        print(f"  wrote {last} journal messages in {time.perf_counter() - t:.1f} s", flush=True)
        c = time.process_time()
        raw = await raw_read(url, auth, spec, last)
        raw_cpu = (time.process_time() - c) / last * 1e6
        print(f"  raw ordered consumer: {last / raw:8.0f} msg/s ({raw:.2f} s; {raw_cpu:.1f} µs CPU a message here)",
              flush=True)

        read_s, read_cpu, follow_s, follow_cpu = await read_alone(url, auth, spec, last)
        print(f"  boot's read alone (no feed): {last / read_s:8.0f} msg/s ({read_s:.2f} s; {read_cpu:.1f} µs CPU a message "
              f"here); a follower's read (subscribe from 1): {last / follow_s:.0f} msg/s ({follow_cpu:.1f} µs CPU a "
              "message)", flush=True)

        c = time.process_time()
        full_s, full = await timed_boot(url, auth, spec, caps, snapshots=False)
        full_cpu = (time.process_time() - c) / last * 1e6
        reference = full.state_hash()
        print(f"  full replay boot: {full_s:6.2f} s ({last / full_s:.0f} msg/s, {full_s / raw:.1f}× the raw read; "
              f"{full_cpu:.1f} µs CPU a message here, {raw_cpu / full_cpu:.2f}× the raw read's CPU rate)", flush=True)
        t = time.perf_counter()
        blob = encode_snapshot(full.projector)
        encode_s = time.perf_counter() - t
        await full.stop()

        store = await SnapshotStore.connect(url, spec.name, auth=auth, timeout=60.0)
        t = time.perf_counter()
        await store.save(blob, spec.name, full.projector.incarnation, covered_seq(full.projector))
        upload_s = time.perf_counter() - t
        t = time.perf_counter()
        got = await store.get((await store.listing())[0].name)
        download_s = time.perf_counter() - t
        t = time.perf_counter()
        decode_snapshot(got)
        decode_s = time.perf_counter() - t
        print(f"  snapshot of {covered_seq(full.projector)} messages: {len(blob)} bytes; "
              f"encode {encode_s * 1e3:.1f} ms, "
              f"upload {upload_s * 1e3:.1f} ms, download {download_s * 1e3:.1f} ms, decode {decode_s * 1e3:.1f} ms",
              flush=True)
        snap_s, rt = await timed_boot(url, auth, spec, caps, snapshots=True)
        assert rt.snapshots.stats.booted_from == last and rt.state_hash() == reference
        await rt.stop()
        print(f"  snapshot boot (tail 0): {snap_s:6.2f} s — {full_s / snap_s:.0f}× faster than the full replay",
              flush=True)

        # the worst case of each --snapshot-every N: the newest snapshot is N − 1 messages behind the end
        rec = await JetStreamRecorder.connect(url, spec, auth=auth, timeout=60.0)
        messages = [(m.subject, m.seq, m.data) async for m in rec.read(1)]
        info = await rec.stream_info()
        await rec.close()
        # the projector alone (no read path): every message fed from memory, CPU time of this process
        alone = Projector(spec.name, full.projector.incarnation, caps)
        t = time.process_time()
        for i in range(0, len(messages), 256):
            alone.feed_many(messages[i:i + 256])
        feed_us = (time.process_time() - t) / len(messages) * 1e6
        assert state_hash(alone.state) == state_hash(full.projector.state)
        print(f"  projector feed alone (from memory): {feed_us:.1f} µs CPU a message "
              f"({1e6 / feed_us:.0f} msg/s of one core)", flush=True)
        del alone
        prefix, fed, blobs = Projector(spec.name, full.projector.incarnation, caps), 0, {}
        for every in sorted(everies, reverse=True):   # one pass over the log, the earliest cut first
            cut = last - (every - 1)
            prefix.feed_many(messages[fed:cut])
            fed = cut
            blobs[every] = (cut, encode_snapshot(prefix))
        del messages
        worst = {}
        for every in sorted(everies):
            cut, snap = blobs[every]
            for entry in await store.listing():
                await store.bucket.remove(entry.name)
            await store.save(snap, spec.name, prefix.incarnation, cut)
            t = time.perf_counter()
            loaded = await load_newest(store, info, caps)
            load_s = time.perf_counter() - t
            assert loaded is not None and loaded[1] == cut + 1
            boot_s, rt = await timed_boot(url, auth, spec, caps, snapshots=True)
            assert rt.snapshots.stats.booted_from == cut and rt.state_hash() == reference
            await rt.stop()
            worst[every] = round(boot_s, 3)
            print(f"  snapshot boot, tail {every - 1} (the worst case of --snapshot-every {every}): {boot_s:6.2f} s "
                  f"(list + download + decode {load_s * 1e3:.0f} ms; tail {(every - 1) / (boot_s - load_s):.0f} "
                  f"msg/s) — {full_s / boot_s:.1f}× faster than the full replay", flush=True)
        await store.close()
        print(json.dumps({"mutations": n, "messages": last, "raw_read_s": round(raw, 3),
                          "full_replay_s": round(full_s, 3), "feed_us": round(feed_us, 1),
                          "raw_cpu_us": round(raw_cpu, 1), "replay_cpu_us": round(full_cpu, 1),
                          "read_cpu_us": round(read_cpu, 1), "follow_cpu_us": round(follow_cpu, 1),
                          "snapshot_bytes": len(blob), "encode_ms": round(encode_s * 1e3, 1),
                          "upload_ms": round(upload_s * 1e3, 1), "download_ms": round(download_s * 1e3, 1),
                          "decode_ms": round(decode_s * 1e3, 1), "snapshot_boot_s": round(snap_s, 3),
                          "worst_boot_s": worst, "load_average_end": round(os.getloadavg()[0], 2)}), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.bench.boot")
    p.add_argument("--mutations", type=int, default=100_000, help="mutations in the log (default 100,000)")
    p.add_argument("--lineages", type=int, default=64, help="participants writing in parallel (default 64)")
    p.add_argument("--every", default=f"{DEFAULT_EVERY},5000,10000",
                   help=f"snapshot intervals whose worst tail is measured (default {DEFAULT_EVERY},5000,10000)")
    args = p.parse_args(argv)
    everies = sorted({int(e) for e in args.every.split(",")})
    if args.lineages * (RETIRE_EVERY + 1) >= Capacities().receipts:
        p.error(f"--lineages × {RETIRE_EVERY + 1} must stay below the {Capacities().receipts} receipts")
    if not all(1 <= e <= args.mutations for e in everies):
        p.error("each --every must be in 1..--mutations")
    with tempfile.TemporaryDirectory(prefix="aotx-bench-boot-") as tmp:
        asyncio.run(bench(args.mutations, args.lineages, everies, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
