"""The blueprint: every shared route, authenticated, answering JSON with Cache-Control: no-store."""

from __future__ import annotations

import asyncio
import re
from typing import Any, AsyncIterator, Mapping

from quart import Blueprint, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from aotx import strict_json
from aotx.journal import LeaseRevision
from aotx.runtime import GrantedRuntime, Outcome, RemoteRuntime, SharedRuntime
from aotx.state import SCHEMA, MalformedMutation, MutationKind, Refusal, parse_json_body, parse_mutation

from ..drain import drain_of
from .auth import Principal, bearer, token_sha256
from .openapi import openapi_document

BASE_PATH = "/aotx/v1/shared"
_EXT = "aotx_shared"
_DECIMAL_MAX = 20
# ASCII only: str.isdigit() also holds for "²", "١", "１", which int() refuses or reads as numbers
_CANONICAL_DECIMAL = re.compile(rf"0|[1-9][0-9]{{0,{_DECIMAL_MAX - 1}}}")
_TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
_KEEPALIVE_SECONDS = 15.0
MEDIA_MAX_BYTES = 8 * 1024 * 1024
_MEDIA_KINDS = ("image", "audio")


def _json(status: int, body: Mapping[str, Any]):
    response = jsonify(body)
    response.status_code = status
    return response


def _error(status: int, type_: str, message: str):
    return _json(status, {"error": {"type": type_, "message": message}})


def _answer(result: Any):
    if isinstance(result, Refusal):
        return _json(result.status, result.error())
    if isinstance(result, Outcome):
        return _json(result.status, result.body)
    return _json(200, result)


class _BadQuery(ValueError):
    pass


def _canonical_decimal(text: str) -> int | None:
    """The value of a canonical ASCII decimal string (no sign, no leading zero, at most 20 digits); else None.
    Every counter a client puts in a query string or a Last-Event-ID is read with this."""
    return int(text) if _CANONICAL_DECIMAL.fullmatch(text) else None


def _query_int(name: str, default: int) -> int:
    text = request.args.get(name)
    if text is None:
        return default
    value = _canonical_decimal(text)
    if value is None:
        raise _BadQuery(f"query parameter {name} must be a canonical decimal string of ASCII digits, got {text!r}")
    return value


def _sse(event: str, data: Mapping[str, Any], event_id: str | None = None) -> bytes:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + strict_json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def _event_id(op: str, offset: int) -> str:
    """An operation event's ID: its path and the exact byte cursor after it."""
    return f"{BASE_PATH}/operations/{op}/events@{offset}"


def _resume_cursor(path: str, name: str) -> int:
    """?{name}= when given; else the cursor of a Last-Event-ID of this stream (`path@cursor`); else 0."""
    if request.args.get(name) is not None:
        return _query_int(name, 0)
    last = request.headers.get("Last-Event-ID")
    if last is None:
        return 0
    prefix = f"{BASE_PATH}{path}@"
    value = _canonical_decimal(last[len(prefix):]) if last.startswith(prefix) else None
    if value is None:
        raise _BadQuery(f"Last-Event-ID {last!r} is not an event ID of {prefix}<cursor> (ASCII decimal)")
    return value


async def _wait_change(runtime: Any, timeout: float) -> None:
    waiter = getattr(runtime, "wait_change", None)
    if waiter is None:  # a remote runtime: poll
        await asyncio.sleep(min(timeout, 0.1))
    else:
        await waiter(timeout)


_TOKEN_GONE = {"error": {"type": "unauthorized", "message": "the bearer token is no longer accepted"}}


def _actor_now() -> Any:
    """For an SSE stream: a function answering the principal's actor with its grants as the gateway
    config says now (reloaded on SIGHUP), or None once its token is gone. Every read asks it again."""
    ext, digest = current_app.extensions[_EXT], g.shared_token

    def now() -> Any:
        principal = ext["principals"].get(digest)
        return None if principal is None else principal.actor
    return now


async def _waited(runtime: Any, drain) -> float | None:
    """Wait for the next state change (at most a second); the seconds waited, for keep-alive timing,
    or None when the server began closing its streams (the stream then ends cleanly)."""
    began = asyncio.get_running_loop().time()
    if not await drain.race(_wait_change(runtime, 1.0)):
        return None
    return asyncio.get_running_loop().time() - began


def make_blueprint(models: tuple[Mapping[str, Any], ...] = (), page_grant: int | None = None) -> Blueprint:
    bp = Blueprint("aotx_shared", __name__, url_prefix=BASE_PATH)

    def ctx() -> tuple[SharedRuntime | GrantedRuntime | RemoteRuntime, Mapping[str, Principal]]:
        ext = current_app.extensions[_EXT]
        return ext["runtime"], ext["principals"]

    @bp.before_request
    async def _authenticate():
        runtime, principals = ctx()
        token = bearer(request.headers.get("Authorization"))
        principal = principals.get(token_sha256(token)) if token else None
        if principal is None:
            response = _error(401, "unauthorized", "a valid bearer token is required")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        g.shared_actor, g.shared_token = principal.actor, token_sha256(token)
        if not runtime.started:
            return _error(503, "unavailable", "the shared runtime is still booting")
        return None

    @bp.after_request
    async def _no_store(response):
        response.headers["Cache-Control"] = "no-store"
        return response

    @bp.errorhandler(_BadQuery)
    async def _bad_query(exc: _BadQuery):
        return _error(400, "invalid_request", str(exc))

    @bp.errorhandler(HTTPException)
    async def _http(exc: HTTPException):
        return _error(exc.code or 500, exc.name.lower().replace(" ", "_"), exc.description or exc.name)

    def read(view: str):
        async def handler(**kwargs: Any):
            runtime, _ = ctx()
            return _answer(await runtime.query(view, g.shared_actor, **kwargs))
        return handler

    async def _foreign_media(raw: bytes, con: str | None) -> Any:
        """Source ownership, checked before the model-capability refusal: a well-formed input may
        reference only media its author uploaded. Malformed bodies are left to submit (400)."""
        try:
            mutation = parse_mutation(MutationKind.INPUT, parse_json_body(raw), con)
        except MalformedMutation:  # submit answers the same parse failure with 400
            return None
        store = current_app.extensions[_EXT]["media"]
        for ref in getattr(mutation, "media", ()):
            if store is None or not await store.uploaded_by(ref.sha256, g.shared_actor.principal):
                return _error(409, "media_not_owned", f"media {ref.sha256} was not uploaded by you: an input may "
                              "reference only media its author uploaded (POST /media)")
        return None

    def mutate(kind: MutationKind):
        async def handler(space: str | None = None, con: str | None = None):
            runtime, _ = ctx()
            raw = await request.get_data(cache=False, as_text=False)
            if kind is MutationKind.INPUT:
                refused = await _foreign_media(raw, con)
                if refused is not None:
                    return refused
            return _answer(await runtime.submit(g.shared_actor, kind, raw, space if con is None else con))
        return handler

    @bp.get("/capabilities")
    async def capabilities():
        runtime, _ = ctx()
        described = await runtime.describe()
        execution = described.get("execution")
        return _json(200, {
            "schemas": {"mutation": SCHEMA},
            "base_path": BASE_PATH,
            "models": execution["models"] if execution else list(models),
            "page_grant": execution["page_grant"] if execution else page_grant,
            "routes": {"inputs": execution is not None, "cancellations": execution is not None,
                       "operation_results": True, "operation_events": True, "memory": True,
                       "publications": True, "media": current_app.extensions[_EXT]["media"] is not None,
                       "conversation_events": True},
            "limits": described.get("limits"),
            "lease_revisions": [int(r) for r in LeaseRevision],
            "identifiers": {"space": "spc-{lineage}-{id}", "conversation": "con-{lineage}-{id}",
                            "operation": "op-{lineage}-{id}", "participant": "par-{lineage}-{id}"},
            "journal": described.get("journal"),
        })

    @bp.get("/participant")
    async def participant():
        runtime, _ = ctx()
        return _answer(await runtime.query("participant", g.shared_actor, participant=request.args.get("participant")))

    @bp.get("/spaces")
    async def spaces():
        runtime, _ = ctx()
        return _answer(await runtime.query("spaces", g.shared_actor, cursor=_query_int("cursor", 0),
                                           limit=_query_int("limit", 100)))

    def space_list(view: str):
        """GET /spaces/{space}/<view>: one page (cursor, limit) of what the space holds."""
        async def handler(space: str):
            runtime, _ = ctx()
            return _answer(await runtime.query(view, g.shared_actor, space=space, cursor=_query_int("cursor", 0),
                                               limit=_query_int("limit", 100)))
        return handler

    @bp.get("/conversations/<con>/events")
    async def conversation_events(con: str):
        """A list by cursor (conversation input order) and limit, or with stream=true SSE `input`
        events (ID = path@order cursor; Last-Event-ID resumes when no cursor is given) and `gap`
        events where retired inputs left the window. Every read rechecks rights."""
        runtime, _ = ctx()
        actor, actor_now = g.shared_actor, _actor_now()
        stream_flag = request.args.get("stream", "false")
        if stream_flag not in ("true", "false"):
            raise _BadQuery(f"query parameter stream must be true or false, got {stream_flag!r}")
        path = f"/conversations/{con}/events"
        cursor = _resume_cursor(path, "cursor")
        limit = _query_int("limit", 100)
        first = await runtime.query("conversation_events", actor, con=con, cursor=cursor, limit=limit)
        if stream_flag == "false" or first.status != 200:
            return _answer(first)
        drain = drain_of(current_app)

        async def stream() -> AsyncIterator[bytes]:
            at, out, idle = cursor, first, 0.0
            while True:
                if out.status != 200:  # rights or membership gone: the stream ends
                    yield _sse("error", out.body)
                    return
                body = out.body
                if body["gap"] is not None:
                    yield _sse("gap", {"gap": body["gap"], "floor": body["floor"]})
                for event in body["events"]:
                    at = int(event["cursor"])
                    yield _sse("input", event, f"{BASE_PATH}{path}@{at}")
                if body["events"] or body["gap"] is not None:
                    idle = 0.0
                    at = max(at, int(body["cursor"]))
                if body["next_cursor"] is None:
                    if idle >= _KEEPALIVE_SECONDS:
                        yield b": keep-alive\n\n"
                        idle = 0.0
                    waited = await _waited(runtime, drain)
                    if waited is None:
                        return
                    idle += waited
                if (actor := actor_now()) is None:
                    yield _sse("error", _TOKEN_GONE)
                    return
                out = await runtime.query("conversation_events", actor, con=con, cursor=at, limit=limit)

        response = Response(stream(), status=200, content_type="text/event-stream")
        response.headers["X-Accel-Buffering"] = "no"
        response.timeout = None
        return response

    @bp.get("/operations/<op>/result")
    async def operation_result(op: str):
        runtime, _ = ctx()
        limit = request.args.get("limit")
        return _answer(await runtime.query("result", g.shared_actor, op=op, offset=_query_int("offset", 0),
                                           limit=None if limit is None else _query_int("limit", 0)))

    @bp.get("/operations/<op>/events")
    async def operation_events(op: str):
        """Always SSE: `output` events as the result is journalled (exact base64 bytes; the ID holds
        the byte cursor after them), then one terminal `end` event. Every read rechecks rights."""
        runtime, _ = ctx()
        actor, actor_now = g.shared_actor, _actor_now()
        start = _resume_cursor(f"/operations/{op}/events", "offset")  # a byte offset
        first = await runtime.query("result", actor, op=op, offset=start)
        if first.status != 200:
            return _answer(first)
        drain = drain_of(current_app)

        async def stream() -> AsyncIterator[bytes]:
            offset, out, idle = start, first, 0.0
            while True:
                if out.status != 200:  # rights or membership gone, or the receipt retired: the stream ends
                    yield _sse("error", out.body)
                    return
                body = out.body
                if body["byte_length"]:
                    offset = body["next_offset"]
                    yield _sse("output", {"offset": body["offset"], "bytes": body["bytes"],
                                          "byte_length": body["byte_length"], "text": body["text"],
                                          "next_offset": offset}, _event_id(op, offset))
                    idle = 0.0
                if body["execution"] in _TERMINAL and body["next_offset"] == body["saved_bytes"]:
                    yield _sse("end", {key: body[key] for key in ("execution", "saved_bytes", "input_tokens",
                                                                  "output_tokens", "finish", "error")},
                               _event_id(op, offset))
                    return
                if idle >= _KEEPALIVE_SECONDS:
                    yield b": keep-alive\n\n"
                    idle = 0.0
                waited = await _waited(runtime, drain)
                if waited is None:
                    return
                idle += waited
                if (actor := actor_now()) is None:
                    yield _sse("error", _TOKEN_GONE)
                    return
                out = await runtime.query("result", actor, op=op, offset=offset)

        response = Response(stream(), status=200, content_type="text/event-stream")
        response.headers["X-Accel-Buffering"] = "no"
        response.timeout = None
        return response

    @bp.post("/media")
    async def media():
        """The raw blob (Content-Type image/* or audio/*), stored under its sha256; 201 new, 200 when
        this principal uploaded the same bytes before."""
        ext = current_app.extensions[_EXT]
        if not g.shared_actor.grants.shared_write:
            return _error(403, "forbidden", "uploading media needs the shared_write grant")
        kind = (request.mimetype or "").partition("/")[0]
        if kind not in _MEDIA_KINDS:
            return _error(415, "unsupported_media_type",
                          f"Content-Type must be image/* or audio/*, got {request.mimetype or 'none'!r}")
        store, cap = ext["media"], ext["media_max_bytes"]
        if store is None:
            return _error(409, "unsupported", "this server has no media store: it does not accept media")
        if request.content_length is not None and request.content_length > cap:
            return _error(413, "too_large", f"media is {request.content_length} bytes; at most {cap}")
        chunks, size = [], 0
        async for chunk in request.body:
            size += len(chunk)
            if size > cap:
                return _error(413, "too_large", f"media exceeds {cap} bytes")
            chunks.append(chunk)
        data = b"".join(chunks)
        if not data:
            return _error(400, "invalid_request", "the media body is empty")
        stored = await store.put(data, g.shared_actor.principal, request.mimetype)
        return _json(201 if stored.created else 200,
                     {"sha256": stored.sha256, "type": kind, "byte_length": stored.byte_length})

    @bp.get("/memory/<obj>")
    async def memory_object(obj: str):
        runtime, _ = ctx()
        return _answer(await runtime.query("memory_object", g.shared_actor, object=obj,
                                           offset=_query_int("offset", 0)))

    @bp.get("/openapi.json")
    async def openapi():
        return _json(200, openapi_document(BASE_PATH))

    bp.add_url_rule("/spaces/<space>", "space", read("space"), methods=["GET"])
    bp.add_url_rule("/conversations/<con>", "conversation",
                    read("conversation"), methods=["GET"])
    bp.add_url_rule("/operations/<op>", "operation", read("operation"),
                    methods=["GET"])
    for view in ("members", "conversations", "memory"):
        bp.add_url_rule(f"/spaces/<space>/{view}", view, space_list(view), methods=["GET"])
    bp.add_url_rule("/participant", "register", mutate(MutationKind.REGISTER), methods=["POST"])
    bp.add_url_rule("/participant/retirements", "retire", mutate(MutationKind.RETIRE), methods=["POST"])
    bp.add_url_rule("/spaces", "create_space", mutate(MutationKind.CREATE_SPACE), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/members", "set_member", mutate(MutationKind.SET_MEMBER), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/conversations", "create_conversation",
                    mutate(MutationKind.CREATE_CONVERSATION), methods=["POST"])
    bp.add_url_rule("/conversations/<con>/inputs", "input", mutate(MutationKind.INPUT), methods=["POST"])
    bp.add_url_rule("/conversations/<con>/cancellations", "cancel", mutate(MutationKind.CANCEL), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/publications", "publish", mutate(MutationKind.PUBLISH), methods=["POST"])

    @bp.route("/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown(rest: str):
        return _error(404, "not_found", f"no shared route {BASE_PATH}/{rest}")

    return bp
