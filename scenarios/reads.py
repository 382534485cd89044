"""Receipts and results read back and checked: an operation's receipt (own: as acknowledged or progressed;
foreign: no sequence), waiting for an input to end, a result read by offset in pages, and `verify`, which
reads every acknowledged receipt and result back."""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .client import Answer
from .ledgers import SUMMARY, receipt_change
from .violation import ScenarioViolation
from .vocabulary import TERMINAL

if TYPE_CHECKING:
    from .runner import Runner


async def read_receipt(runner: Runner, actor: str, op: str) -> Answer:
    expected = runner.model.read_operation_status(actor, op)
    got = await runner.check_read(actor, f"/operations/{op}", expected)
    if got.status == 200:
        i = runner.model.inputs.get(op)
        own = i is not None and i.actor == actor or i is None
        if (got.body["sequence"] is None) == own:
            raise ScenarioViolation(f"GET /operations/{op} as {actor}: sequence {got.body['sequence']!r} "
                                    f"({'own' if own else 'foreign'} receipt)")
        if own:
            seq = int(got.body["sequence"])
            prior = runner.model.parties[actor].receipts[seq].body
            wrong = receipt_change(prior, got.body) if prior is not None else None
            if wrong:
                raise ScenarioViolation(f"GET /operations/{op} as {actor}: {wrong}\n{got.body}\n{prior}")
            runner.progress(actor, op, got.body)
        elif i is not None:
            runner.observe(op, got.body["execution"], f"GET /operations/{op} as {actor}")
    return got


async def refresh_inputs(runner: Runner, actor: str) -> None:
    """Read the receipt of every own input not known to have ended."""
    for i in runner.model.inputs_of(actor):
        if not i.ended and not i.retired:
            await read_receipt(runner, actor, i.op)


async def wait_input(runner: Runner, actor: str, op: str, timeout: float | None = None) -> dict[str, Any]:
    """Poll the receipt until the input ends; answers the ended receipt."""
    deadline = time.monotonic() + (runner.wait_s if timeout is None else timeout)
    i = runner.model.inputs[op]
    if i.retired:   # its receipt is gone (it had ended): what was last seen of it
        return {"operation": op, "execution": i.execution, "result": None}
    reader = actor if runner.model.read_operation_status(actor, op) == 200 else i.actor
    while True:
        got = await read_receipt(runner, reader, op)
        if got.status != 200:
            raise ScenarioViolation(f"waiting for {op} as {reader}: {got.status} {got.body}")
        if got.body["execution"] in TERMINAL:
            return got.body
        if time.monotonic() > deadline:
            raise ScenarioViolation(f"input {op} did not end within the wait: {got.body['execution']}")
        await asyncio.sleep(0.05)


async def read_result(runner: Runner, actor: str, op: str, *, offset: int = 0, limit: int | None = None) -> Answer:
    """GET /operations/{op}/result from `offset` to the end saved now (pages of `limit` bytes)."""
    expected = runner.model.read_result_status(actor, op)
    first = None
    offset = min(offset, runner.readable.read_so_far(op))
    while True:
        q = f"?offset={offset}" + ("" if limit is None else f"&limit={limit}")
        got = await runner.check_read(actor, f"/operations/{op}/result{q}", expected)
        first = first or got
        if got.status != 200:
            return got
        what = f"GET /operations/{op}/result{q} as {actor}"
        body = got.body
        runner.readable.span(op, what, body)
        runner.observe(op, body["execution"], what)
        if body["execution"] in TERMINAL and body["next_offset"] == body["saved_bytes"]:
            runner.readable.final(op, what, {k: body[k] for k in SUMMARY})
        runner.stats["result_spans_checked"] += 1
        if body["next_offset"] >= body["saved_bytes"]:
            return first
        offset = body["next_offset"]


async def verify(runner: Runner) -> int:
    """Every acknowledged receipt identical (an input's only progressed; 410 once retired), counters
    as the model says, and every ended input's result byte-identical to what was read before."""
    checks = 0
    for name in runner.parties:
        mp = runner.model.parties[name]
        me = await runner.check_read(name, "/participant", 200)
        want = {"registered": mp.registered, "participant": mp.pid, "next_sequence": str(mp.next),
                "retry_floor": str(mp.floor)}
        got = {k: me.body[k] for k in want}
        if got != want:
            raise ScenarioViolation(f"{name}: participant {got}, the ledger says {want}")
        checks += 1
        for r in list(mp.receipts.values()):
            if r.body is None:
                continue
            op = r.body["operation"]
            if op in runner.model.inputs:
                await read_receipt(runner, name, op)
                await read_result(runner, name, op)   # agrees with every byte read of it before
                checks += 1
            else:
                await runner.check_read(name, f"/operations/{op}", 200, r.body)
            checks += 1
        for op in sorted(mp.retired_ops):
            await runner.check_read(name, f"/operations/{op}", 410)
            checks += 1
    return checks
