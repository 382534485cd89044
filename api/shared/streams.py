"""The shared SSE streams: a conversation's inputs and an operation's result, pushed as they are saved.

A stream subscribes to the runtime's broker (aotx.runtime.broker) by conversation or by operation
*before* its first read, so nothing saved after that read is missed, and waits on that subscription
alone: traffic elsewhere never wakes it. Woken, it reads again with the principal's actor as the
gateway config says now (reloaded on SIGHUP; a token gone ends the stream with an `unauthorized`
error event), so rights are rechecked on every read, and a refused read ends the stream with an
`error` event. An operation stream takes the new bytes from the applied output events the broker
pushes and reads only its rights and status (`result` with limit 0) before it delivers them; after
a wake-up that carries no bytes (rights changed, a resync after its queue overflowed) it reads the
bytes from its cursor. A keep-alive comment goes out after 15 s without an event. Once the server
begins closing its streams (the shutdown drain) a stream ends cleanly at once.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable

from quart import Blueprint, current_app, g, request

from aotx.runtime import Outcome, RuntimePort
from aotx.runtime.broker import Subscription
from aotx.state.execution import OutputAppended
from aotx.state.queries import span_fields

from ..drain import Drain, drain_of
from ..sse import KEEPALIVE, ServerSentEvent, sse_response
from .common import BASE_PATH, EXT, actor, answer, invalid, query_int, resume_cursor, runtime

KEEPALIVE_SECONDS = 15.0
TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
TOKEN_GONE = {"error": {"type": "unauthorized", "message": "the bearer token is no longer accepted"}}
_END_FIELDS = ("execution", "saved_bytes", "input_tokens", "output_tokens", "finish", "error")
ActorNow = Callable[[], Any]


def actor_now() -> ActorNow:
    """For an SSE stream: a function answering the principal's actor with its grants as the gateway
    config says now (reloaded on SIGHUP), or None once its token is gone. Every read asks it again."""
    ext, digest = current_app.extensions[EXT], g.shared_token

    def now() -> Any:
        principal = ext["principals"].get(digest)
        return None if principal is None else principal.actor
    return now


def event_id(op: str, offset: int) -> str:
    """An operation event's ID: its path and the exact byte cursor after it."""
    return f"{BASE_PATH}/operations/{op}/events@{offset}"


def _sse(event: str, data: Any, id: str | None = None) -> bytes:
    return ServerSentEvent(data, event, id).encode()


class _Idle:
    """When the last bytes went out: the wait before a keep-alive is due."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.sent()

    def sent(self) -> None:
        self._at = self._loop.time()

    def left(self) -> float:
        return max(0.0, KEEPALIVE_SECONDS - (self._loop.time() - self._at))


_CHANGED, _IDLE, _CLOSING = "changed", "idle", "closing"


async def _wait(sub: Subscription, drain: Drain, idle: _Idle) -> str:
    """Until a change that concerns `sub` is queued (_CHANGED), a keep-alive is due (_IDLE) or the
    server begins closing its streams (_CLOSING)."""
    if not await drain.race(sub.wait(idle.left())):
        return _CLOSING
    if sub.pending:
        return _CHANGED
    idle.sent()
    return _IDLE


def _pushed(deltas: list, offset: int) -> bytes | None:
    """The bytes after `offset` that the queued output events carry, in order; None when they leave a
    gap (then the stream reads from its cursor)."""
    out, at = bytearray(), offset
    for ev in deltas:
        if isinstance(ev, OutputAppended):
            end = ev.offset + len(ev.data)
            if end <= at:
                continue     # already read (it was saved before the read that followed the subscription)
            if ev.offset > at:
                return None
            out += ev.data[at - ev.offset:]
            at = end
    return bytes(out)


async def conversation_stream(rt: RuntimePort, sub: Subscription, con: str, cursor: int, limit: int,
                              first: Outcome, now: ActorNow, drain: Drain) -> AsyncIterator[bytes]:
    """`input` events after `cursor` (ID = path@order cursor), `gap` where retired inputs left the window."""
    path = f"{BASE_PATH}/conversations/{con}/events"
    at, out, idle = cursor, first, _Idle()
    with sub:
        while True:
            if out.status != 200:   # rights or membership gone: the stream ends
                yield _sse("error", out.body)
                return
            body = out.body
            if body["gap"] is not None:
                yield _sse("gap", {"gap": body["gap"], "floor": body["floor"]})
            for event in body["events"]:
                at = int(event["cursor"])
                yield _sse("input", event, f"{path}@{at}")
            if body["events"] or body["gap"] is not None:
                idle.sent()
                at = max(at, int(body["cursor"]))
            if body["next_cursor"] is None:   # caught up: wait for this conversation to change
                while (waited := await _wait(sub, drain, idle)) == _IDLE:
                    yield KEEPALIVE
                if waited == _CLOSING:
                    return
                sub.take()
            if (actor := now()) is None:
                yield _sse("error", TOKEN_GONE)
                return
            sub.reads += 1
            out = await rt.query("conversation_events", actor, con=con, cursor=at, limit=limit)


async def operation_stream(rt: RuntimePort, sub: Subscription, op: str, start: int, first: Outcome,
                           now: ActorNow, drain: Drain) -> AsyncIterator[bytes]:
    """`output` events (exact base64 bytes; the ID holds the byte cursor after them), then one `end`."""
    offset, out, idle = start, first, _Idle()
    with sub:
        while True:
            if out.status != 200:   # rights or membership gone, or the receipt retired: the stream ends
                yield _sse("error", out.body)
                return
            body = out.body
            if body["byte_length"]:
                offset = body["next_offset"]
                yield _sse("output", {"offset": body["offset"], "bytes": body["bytes"],
                                      "byte_length": body["byte_length"], "text": body["text"],
                                      "next_offset": offset}, event_id(op, offset))
                idle.sent()
            if body["execution"] in TERMINAL and body["next_offset"] == body["saved_bytes"]:
                yield _sse("end", {key: body[key] for key in _END_FIELDS}, event_id(op, offset))
                return
            while (waited := await _wait(sub, drain, idle)) == _IDLE:
                yield KEEPALIVE
            if waited == _CLOSING:
                return
            batch = sub.take()
            if (actor := now()) is None:
                yield _sse("error", TOKEN_GONE)
                return
            pushed = None if batch.resync else _pushed(batch.deltas, offset)
            sub.reads += 1
            if pushed is None:
                out = await rt.query("result", actor, op=op, offset=offset)
                continue
            # the bytes came with the change: read the rights and the status only, then deliver them
            sub.pushes += 1
            out = await rt.query("result", actor, op=op, offset=offset, limit=0)
            if out.status == 200:
                out = Outcome(200, {**out.body, **span_fields(offset, pushed)})


def register(bp: Blueprint) -> None:
    @bp.get("/conversations/<con>/events")
    async def conversation_events(con: str):
        """A list by cursor (conversation input order) and limit, or with stream=true SSE `input`
        events (ID = path@order cursor; Last-Event-ID resumes when no cursor is given) and `gap`
        events where retired inputs left the window. Every read rechecks rights."""
        rt, who, now = runtime(), actor(), actor_now()
        stream_flag = request.args.get("stream", "false")
        if stream_flag not in ("true", "false"):
            raise invalid(f"query parameter stream must be true or false, got {stream_flag!r}")
        cursor = resume_cursor(f"/conversations/{con}/events", "cursor")
        limit = query_int("limit", 100)
        if stream_flag == "false":
            return answer(await rt.query("conversation_events", who, con=con, cursor=cursor, limit=limit))
        sub = rt.broker.conversation(con)   # before the first read: nothing saved after it is missed
        try:
            first = await rt.query("conversation_events", who, con=con, cursor=cursor, limit=limit)
        except BaseException:
            sub.close()
            raise
        if first.status != 200:
            sub.close()
            return answer(first)
        return sse_response(conversation_stream(rt, sub, con, cursor, limit, first, now, drain_of(current_app)))

    @bp.get("/operations/<op>/events")
    async def operation_events(op: str):
        """Always SSE: `output` events as the result is journalled (exact base64 bytes; the ID holds
        the byte cursor after them), then one terminal `end` event. Every read rechecks rights."""
        rt, who, now = runtime(), actor(), actor_now()
        start = resume_cursor(f"/operations/{op}/events", "offset")  # a byte offset
        sub = rt.broker.operation(op)
        try:
            first = await rt.query("result", who, op=op, offset=start)
        except BaseException:
            sub.close()
            raise
        if first.status != 200:
            sub.close()
            return answer(first)
        return sse_response(operation_stream(rt, sub, op, start, first, now, drain_of(current_app)))
