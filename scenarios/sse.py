"""Reading an operation's SSE stream (GET /operations/{op}/events) to its end, resumed by Last-Event-ID, and
checking it: output events continue at the byte where the last one ended and agree with every byte read of
the result before; an `end` event is the ended result's summary; an `error` event ends it only once the
reader may no longer read it."""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from .client import BASE, Answer, parse_sse
from .ledgers import SUMMARY
from .violation import ScenarioViolation, allows, show

if TYPE_CHECKING:
    from .runner import Runner


def event_id(op: str, at: int) -> str:
    """The id of the event after byte `at` of an operation's output (what Last-Event-ID resumes from)."""
    return f"{BASE}/operations/{op}/events@{at}"


async def read_events(runner: Runner, actor: str, op: str, resume: int | None = None) -> Answer:
    """GET /operations/{op}/events (SSE) to its end, resumed by Last-Event-ID at byte `resume` (at most what
    was read of the result so far)."""
    expected = runner.model.read_result_status(actor, op)
    headers = None
    if resume is not None:
        resume = min(resume, runner.readable.read_so_far(op))
        headers = {"Last-Event-ID": event_id(op, resume)}
    what = f"GET /operations/{op}/events as {actor}" + (f" from {resume}" if resume is not None else "")
    party = runner.parties[actor]
    got = await runner.definitive(lambda: party.get(f"/operations/{op}/events", headers), what)
    if not allows(expected, got.status):
        raise ScenarioViolation(f"{what}: expected {show(expected)}, got {got.status} {got.body}")
    runner.stats["reads_checked"] += 1
    if got.status != 200:
        return got
    events = parse_sse(got.body)
    at = resume or 0
    for e in events:
        if e["event"] == "output":
            d = e["data"]
            if d["offset"] != at:
                raise ScenarioViolation(f"{what}: output at {d['offset']}, expected {at}")
            data = base64.b64decode(d["bytes"])
            runner.readable.add(op, what, at, data)
            at += len(data)
            if e.get("id") != event_id(op, at):
                raise ScenarioViolation(f"{what}: event id {e.get('id')!r} after byte {at}")
        elif e["event"] == "end":
            d = e["data"]
            runner.observe(op, d["execution"], what)
            runner.readable.final(op, what, {k: d[k] for k in SUMMARY})
        elif e["event"] == "error":
            # rights or membership went away during the stream: only then may it end this way
            if runner.model.read_result_status(actor, op) == 200:
                raise ScenarioViolation(f"{what}: the stream ended with {e['data']} while still readable")
    if not events or events[-1]["event"] not in ("end", "error"):
        raise ScenarioViolation(f"{what}: the stream ended without an end or error event: {events[-1:]}")
    runner.stats["event_streams_checked"] += 1
    return got
