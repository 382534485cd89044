"""`aotx audit --nats URL [--from SEQ]`: tail the journal, one decoded line per transfer.

    seq=<stream seq> lineage=<32 hex> kind=<transfer kind> transfer=<id> event=<event kind>
    operation=<op-…> sequence=<n>

A control transfer prints `event=runtime.boot boot=<id>`. A record or transfer that does not
verify prints `seq=<n> fault=<code> …` and the tail goes on (the live reassembler drops it).
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TextIO

from aotx.journal import Reassembler, Transfer, TransferKind
from aotx.runtime import BOOT_CONTROL
from aotx.runtime_file import RuntimeFileError, read_runtime_file
from aotx.state import IdKind, decode_event, format_id
from eventlog import JetStreamRecorder, NatsAuth, NatsAuthorizationError, StreamSpec, connect
from ops.nats_args import NatsArgsError, add_nats_arguments, nats_auth


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_nats_arguments(p, required=True, help="NATS URL of the journal")
    p.add_argument("--from", dest="from_seq", type=int, default=1, help="first stream sequence (default 1)")
    p.add_argument("--runtime", help="take the stream name and subject prefix from this runtime file")
    p.add_argument("--stream", default=None, help="journal stream name (default AOTX_JOURNAL)")
    p.add_argument("--no-follow", action="store_true", help="stop at the end of the journal instead of tailing")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def transfer_line(seq: int, subject: str, t: Transfer) -> str:
    try:
        kind = TransferKind(t.kind).name.lower()
    except ValueError:
        kind = f"unknown({t.kind})"
    lineage = subject.split(".")[-2] if subject.count(".") >= 2 else "-"
    head = f"seq={seq} lineage={lineage} kind={kind} transfer={t.transfer_id}"
    if t.kind == TransferKind.CONTROL and isinstance(t.body, dict) and t.body.get("kind") == BOOT_CONTROL:
        return f"{head} event={BOOT_CONTROL} boot={t.body.get('boot')}"
    if t.kind in (TransferKind.MUTATION, TransferKind.RETIREMENT):
        try:
            event = decode_event(t.payload)
        except Exception as exc:  # a payload this reader cannot decode is shown, not fatal
            return f"{head} event=undecodable error={type(exc).__name__}"
        op = event.op
        return (f"{head} event={event.KIND} operation={format_id(IdKind.OPERATION, op.lineage, op.operation)} "
                f"sequence={op.sequence}")
    return f"{head} event=- bytes={len(t.payload)}"


class Auditor:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.reassembler = Reassembler(recovery=False)
        self.lines = 0

    def feed(self, seq: int, subject: str, data: bytes) -> None:
        before = len(self.reassembler.faults)
        for t in self.reassembler.feed_message(data, position=seq):
            print(transfer_line(seq, subject, t), file=self.out, flush=True)
            self.lines += 1
        for fault in self.reassembler.faults[before:]:
            print(f"seq={seq} fault={getattr(fault, 'code', type(fault).__name__)} {fault}", file=self.out, flush=True)


def run(args: argparse.Namespace) -> int:
    spec = StreamSpec()
    try:
        auth = nats_auth(args)
    except NatsArgsError as exc:
        print(f"aotx audit: {exc}", file=sys.stderr)
        return 2
    if args.runtime:
        try:
            name, prefix = read_runtime_file(args.runtime).stream()
        except (RuntimeFileError, KeyError) as exc:
            print(f"aotx audit: {exc}", file=sys.stderr)
            return 2
        spec = StreamSpec(name=name, subject_prefix=prefix)
    if args.stream:
        spec = StreamSpec(name=args.stream, subject_prefix=spec.subject_prefix)
    return asyncio.run(_audit(args.nats, auth, spec, args.from_seq, not args.no_follow))


async def _audit(url: str, auth: NatsAuth | None, spec: StreamSpec, from_seq: int, follow: bool) -> int:
    async def quiet(exc: Exception) -> None:
        print(f"aotx audit: nats: {type(exc).__name__}: {exc}", file=sys.stderr)

    try:
        nc = await connect(url, auth, name="aotx-audit", error_cb=quiet, max_reconnect_attempts=-1,
                           reconnect_time_wait=0.2)
    except NatsAuthorizationError as exc:
        print(f"aotx audit: {exc}", file=sys.stderr)
        return 1
    # no ensure_stream: the auditor only reads, it never creates or changes the stream
    recorder = JetStreamRecorder(nc, spec, owns_connection=True, timeout=5.0)
    auditor = Auditor(sys.stdout)
    try:
        if not follow:
            async for msg in recorder.read(from_seq):
                auditor.feed(msg.seq, msg.subject, msg.data)
            return 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        sub = await recorder.subscribe(from_seq)

        async def pump() -> None:
            async for msg in sub:
                auditor.feed(msg.seq, msg.subject, msg.data)

        task = loop.create_task(pump())
        stopper = loop.create_task(stop.wait())
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        failed = task.exception() if task.done() and not task.cancelled() else None
        for t in (task, stopper):
            t.cancel()
        await sub.close()
        if failed is not None:
            print(f"aotx audit: the journal tail stopped: {type(failed).__name__}: {failed}", file=sys.stderr)
            return 1
        return 0
    finally:
        await recorder.close()
