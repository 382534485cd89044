"""The shared mutation POSTs (and the one-view GETs) served straight from ASGI, in front of the Quart app
(issue 10, session 9).

Quart's request machinery (a Request, a context, two tasks, hooks, routing, jsonify, a werkzeug
Response) costs about as much server CPU as the runtime's own work on a small POST
(docs/PERFORMANCE.md, "Issue 10, session 9"). `FastPath` wraps the app's ASGI callable (attach_shared
installs it) and answers the POST rules whose view is a `mutate(kind)` handler (api.shared.mutations)
and the GET rules whose view is a `read(view)` handler (api.shared.common: a receipt, a space, a
conversation) itself, through the same functions the blueprint's handlers use: `authenticate`
(api.shared.auth); `submit_raw` (parse once, media ownership, the runtime) or the runtime's `query` with
the rule's argument; `answer_parts` + `answer_body` (the runtime's result as status, body, headers); the
app's JSON provider's `text` (what jsonify sends); the request id (`id_for`) and its log line
(`log_request`). Its answers carry the headers the Quart route's give (Content-Type, Content-Length, a
Retry-After or WWW-Authenticate, Cache-Control: no-store, x-request-id, request-id), in the same order
(tests/shared_api/test_fast_path.py compares both paths byte for byte).

Everything else goes to the Quart app unchanged: another method (HEAD, OPTIONS, …), path or route; a
query string, a root path; Transfer-Encoding, Expect, or a Content-Length that is not plain ASCII digits
or is over MAX_CONTENT_LENGTH; a body that grows over it or a client that leaves while it is read (the
messages read so far are replayed to Quart); a draining gateway (api.drain); an app with a request hook
the fast path does not know, or a rule werkzeug would not route to the same view. An exception no
function here answers (a bug) is rendered by the Quart app's own error handlers, in a request context.
`AOTX_SHARED_FAST=0` turns it off.

Known difference: a client that disconnects while its mutation is being submitted is not noticed
(Quart cancels its handler; here the runtime's answer is written to the closed connection and logged).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any

from werkzeug.exceptions import RequestTimeout

from ..drain import EXT as DRAIN_EXT
from ..errors import ApiError, shared_body, with_id
from ..http_exchange import body_now, respond
from ..request_ids import id_for, log_request
from ..wire_json import StrictJSONProvider
from .auth import BOOTING, UNAUTHORIZED, UNAUTHORIZED_HEADERS, authenticate
from .common import BASE_PATH, EXT, answer_body, answer_parts, http_error
from .mutations import submit_raw

SWITCH = "AOTX_SHARED_FAST"
_SEGMENT = "([A-Za-z0-9_-]+)"   # a route argument (ids are spc-…, con-…): anything else goes to Quart
_ARG = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")
_METHODS = ("POST", "GET")
_DIGITS = re.compile(rb"[0-9]{1,19}")
# the request hooks whose effect on a shared mutation POST is known (module, qualname):
_BEFORE_OK = {("api.request_ids", "install.<locals>._begin"),            # the request id: id_for
              ("api.app", "create_app.<locals>._refuse_while_draining"),  # draining: goes to Quart
              ("api.app", "create_app.<locals>._auth"),                   # the shared prefix checks its own
              ("api.worker_proxy", "install_forwarding.<locals>._forward")}   # forwards no shared path
_AFTER = [("api.request_ids", "install.<locals>._stamp")]                 # x-request-id, request-id, log
_BP = "aotx_shared"
_BP_BEFORE = [("api.shared.routes", "make_blueprint.<locals>._authenticate")]
_BP_AFTER = [("api.shared.routes", "make_blueprint.<locals>._no_store")]


def enabled_by_env() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


def _names(funcs: Any) -> list[tuple[str, str]]:
    return [(getattr(f, "__module__", ""), getattr(f, "__qualname__", "")) for f in funcs or ()]


def _rule_regex(rule: str) -> re.Pattern | None:
    """A werkzeug rule of default-converter arguments as a regex of its path; None for any other rule."""
    if "<" in _ARG.sub("", rule) or rule.endswith("/"):
        return None
    parts = _ARG.split(rule)   # static, name, static, name, …
    return re.compile("".join(_SEGMENT if i % 2 else re.escape(p) for i, p in enumerate(parts)))


class FastPath:
    """ASGI middleware: the shared mutation POSTs here, everything else to `inner` (the Quart app's)."""

    def __init__(self, app: Any, inner: Any) -> None:
        self.app, self.inner = app, inner
        self.on = enabled_by_env()
        self.served = 0   # requests answered here (tests and benches read it)
        self._routes: dict[str, list[tuple[re.Pattern, Any, str | None]]] | None = None

    def routes(self, method: str) -> list[tuple[re.Pattern, Any, str | None]]:
        """(path regex, mutation kind or view, argument name) of the `method` rules served here (checked
        once, at the first request: every hook is registered by then)."""
        if self._routes is None:
            self._routes = self._prepare()
        return self._routes.get(method, [])

    def _hooks_known(self) -> bool:
        app = self.app
        before, after = app.before_request_funcs, app.after_request_funcs
        return (set(_names(before.get(None))) <= _BEFORE_OK and _names(after.get(None)) == _AFTER
                and _names(before.get(_BP)) == _BP_BEFORE and _names(after.get(_BP)) == _BP_AFTER
                and not any(app.teardown_request_funcs.values()) and not any(app.url_value_preprocessors.values())
                and isinstance(app.json, StrictJSONProvider))

    def _prepare(self) -> dict[str, list[tuple[re.Pattern, Any, str | None]]]:
        if not self._hooks_known():
            return {}
        app, out = self.app, {"POST": [], "GET": []}
        adapter = app.url_map.bind("localhost")
        for rule in app.url_map.iter_rules():
            view = app.view_functions.get(rule.endpoint)
            served = (("POST", getattr(view, "mutation_kind", None)), ("GET", getattr(view, "query_view", None)))
            for method, what in served:
                regex = _rule_regex(rule.rule) if what is not None and method in (rule.methods or ()) else None
                if regex is None or len(rule.arguments) > 1 or rule.host or rule.subdomain:
                    continue
                sample = _ARG.sub("x0", rule.rule)   # werkzeug routes a path of this shape to this rule
                if adapter.match(sample, method=method)[0] == rule.endpoint:
                    out[method].append((regex, what, next(iter(rule.arguments), None)))
        return out

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (not self.on or scope["type"] != "http" or scope["method"] not in _METHODS or scope["query_string"]
                or scope.get("root_path") or not scope["path"].startswith(BASE_PATH)):
            return await self.inner(scope, receive, send)
        path, method = scope["path"], scope["method"]
        for regex, what, arg in self.routes(method):
            m = regex.fullmatch(path)
            if m is not None:
                break
        else:
            return await self.inner(scope, receive, send)
        auth = rid_sent = length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value if auth is None else auth
            elif name == b"x-request-id":
                rid_sent = value if rid_sent is None else rid_sent
            elif name == b"content-length":
                length = value if length is None else length
            elif name in (b"transfer-encoding", b"expect"):
                return await self.inner(scope, receive, send)
        app = self.app
        limit = app.config["MAX_CONTENT_LENGTH"]
        if length is not None and (not _DIGITS.fullmatch(length) or (limit is not None and int(length) > limit)):
            return await self.inner(scope, receive, send)
        drain = app.extensions.get(DRAIN_EXT)
        if drain is not None and drain.draining:
            return await self.inner(scope, receive, send)
        began = time.perf_counter()
        rid = id_for(rid_sent.decode("latin-1") if rid_sent is not None else "")
        ext = app.extensions[EXT]
        found = authenticate(ext["principals"], auth.decode("latin-1") if auth is not None else None)
        if found is None:
            return await self._error(send, method, path, rid, began, UNAUTHORIZED, UNAUTHORIZED_HEADERS)
        runtime = ext["runtime"]
        if not runtime.started:
            return await self._error(send, method, path, rid, began, BOOTING)
        read = b"" if method != "POST" else body_now(receive)
        if read is None:
            read = await self._body(receive, limit, app.config["BODY_TIMEOUT"])
        elif limit is not None and len(read) > limit:
            read = [{"type": "http.request", "body": read, "more_body": False}]
        if isinstance(read, list):   # not read whole: Quart answers it, from the messages read so far
            return await self.inner(scope, _replaying(read, receive), send)
        if read is None:
            return await self._error(send, method, path, rid, began, http_error(RequestTimeout()))
        who = found[0].actor
        value = m.group(1) if m.lastindex else None
        try:
            if method == "POST":
                result = await submit_raw(runtime, what, read, value, who, ext["media"])
            else:   # a GET's body is left unread, as the Quart route leaves it
                result = await runtime.query(what, who, **({} if arg is None else {arg: value}))
            status, body, headers = answer_parts(result)
            data = self.app.json.data(answer_body(status, body, rid))
        except ApiError as err:
            return await self._error(send, method, path, rid, began, err)
        except Exception as exc:   # a bug: rendered as the Quart app renders it
            return await self._quart_error(scope, send, exc, rid, began, who, found[1])
        await self._send(send, method, path, rid, began, status, data, headers)

    @staticmethod
    async def _body(receive: Any, limit: int | None, timeout: float | None) -> bytes | list | None:
        """The whole body; the messages read when it is not there whole (over `limit`, a disconnect);
        None after `timeout` seconds (Quart's BODY_TIMEOUT: a 408)."""
        messages: list[dict] = []
        size = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    message = await receive()
                    messages.append(message)
                    if message["type"] != "http.request":
                        return messages
                    size += len(message.get("body", b""))
                    if limit is not None and size > limit:
                        return messages
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return None
        return messages[0].get("body", b"") if len(messages) == 1 else b"".join(x.get("body", b"") for x in messages)

    async def _error(self, send: Any, method: str, path: str, rid: str, began: float, err: ApiError,
                     headers: dict[str, str] | None = None) -> None:
        data = self.app.json.data(with_id(shared_body(err), rid))
        await self._send(send, method, path, rid, began, err.status, data, headers or {})

    async def _send(self, send: Any, method: str, path: str, rid: str, began: float, status: int, data: bytes,
                    headers: dict[str, str]) -> None:
        self.served += 1
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        raw += [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        rid_bytes = rid.encode()
        raw += [(b"cache-control", b"no-store"), (b"x-request-id", rid_bytes), (b"request-id", rid_bytes)]
        log_request(rid, method, path, status, began)
        await respond(send, status, raw, data)   # one write on uvicorn (api.http_exchange)

    async def _quart_error(self, scope: dict, send: Any, exc: Exception, rid: str, began: float,
                           who: Any, token: str) -> None:
        """`exc` answered by the app's error handlers and after-request hooks, as Quart's dispatch does."""
        from quart import g
        from quart.asgi import ASGIHTTPConnection

        app = self.app
        self.served += 1
        conn = ASGIHTTPConnection(app, scope)
        request = conn._create_request_from_scope(send)
        async with app.request_context(request) as ctx:
            g.request_id, g.request_began, g.shared_actor, g.shared_token = rid, began, who, token
            try:
                response = await app.finalize_request(await app.handle_user_exception(exc), ctx)
            except Exception as error:
                response = await app.handle_exception(error)
        await conn._send_response(send, response)


def _replaying(messages: list[dict], receive: Any) -> Any:
    """A receive that gives `messages` again, then reads on."""
    pending = list(messages)

    async def replay() -> dict:
        return pending.pop(0) if pending else await receive()
    return replay


def install(app: Any, ext: dict[str, Any]) -> None:
    """Put the fast path in front of `app` (once); ext["fast"] is it."""
    fast = app.asgi_app if isinstance(app.asgi_app, FastPath) else FastPath(app, app.asgi_app)
    ext["fast"] = app.asgi_app = fast
