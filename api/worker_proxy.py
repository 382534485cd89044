"""An HTTP worker's forwarding of the routes whose state has one writer: the main process.

In `aotx serve --http-workers N` the stored surfaces (Responses and Conversations, stored, background
and resumed runs; a Responses request that stores nothing runs in the worker), every request with an
Idempotency-Key, and the engine's figures (/metrics,
/v1/stats) are answered by the main process's own listener on a private loopback port; a worker
forwards them as they came (method, path, query, headers, body) and answers with what came back:
the status, the headers (less the hop-by-hop ones and those its own server writes) and the body,
buffered when the main process sent a length, streamed (SSE) otherwise. A client that leaves closes
the forwarded connection, so the main process sees the disconnect as it would have.
"""
from __future__ import annotations

import json
import logging

import httpx
from quart import Response, request

from api.errors import ApiError
from api.idempotency.header import HEADER as IDEMPOTENCY_HEADER
from api.request_ids import ANTHROPIC_HEADER as ANTHROPIC_REQUEST_ID_HEADER
from api.request_ids import HEADER as REQUEST_ID_HEADER
from api.request_ids import current_request_id

log = logging.getLogger("aotx.worker_proxy")
PREFIXES = ("/v1/responses", "/v1/conversations")
PATHS = frozenset({"/metrics", "/v1/stats"})
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
                  "trailer", "host", "content-length", "expect"})
# written by this worker: its server's, and the request ids (api.request_ids stamps the same id last)
_OWN = _HOP | {"date", "server", REQUEST_ID_HEADER, ANTHROPIC_REQUEST_ID_HEADER}


def forwarded(method: str, path: str, headers, body: bytes = b"") -> bool:
    """Does this request belong to the main process? A `POST /v1/responses` that stores nothing (`store`
    false, no `background`, `previous_response_id` or `conversation`) does not: it runs in the worker."""
    if IDEMPOTENCY_HEADER in headers or path in PATHS:
        return True
    if method == "POST" and path == "/v1/responses":
        return not _stores_nothing(body)
    return any(path == p or path.startswith(p + "/") for p in PREFIXES)


def _stores_nothing(body: bytes) -> bool:
    try:
        parsed = json.loads(body)
    except ValueError:   # the main process answers the malformed body
        return False
    return (isinstance(parsed, dict) and parsed.get("store") is False and not parsed.get("background")
            and parsed.get("previous_response_id") is None and parsed.get("conversation") is None)


def install_forwarding(app, main_url: str) -> None:
    """Forward the main process's routes of `app` (a worker's app) to `main_url` (http://127.0.0.1:PORT)."""
    state: dict[str, httpx.AsyncClient] = {}

    @app.before_serving
    async def _open() -> None:
        state["client"] = httpx.AsyncClient(base_url=main_url, timeout=httpx.Timeout(None, connect=5.0),
                                            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

    @app.after_serving
    async def _close() -> None:
        client = state.pop("client", None)
        if client is not None:
            await client.aclose()

    @app.before_request
    async def _forward():
        body = await request.get_data() if request.method == "POST" and request.path == "/v1/responses" else b""
        if not forwarded(request.method, request.path, request.headers, body):
            return None
        return await _send(state["client"])


async def _send(client: httpx.AsyncClient) -> Response:
    path = request.path
    body = await request.get_data()
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != REQUEST_ID_HEADER]
    headers.append((REQUEST_ID_HEADER, current_request_id()))   # one id for the client, the worker and main
    target = request.path + (f"?{request.query_string.decode('latin-1')}" if request.query_string else "")
    try:
        upstream = await client.send(client.build_request(request.method, target, headers=headers, content=body),
                                     stream=True)
    except httpx.HTTPError as exc:
        log.warning("forwarding %s %s to the main process failed: %s: %s", request.method, request.path,
                    type(exc).__name__, exc)
        raise ApiError(503, "The server's main process is unavailable; retry later.", code="engine_unavailable") from None
    out_headers = [(k, v) for k, v in upstream.headers.multi_items() if k.lower() not in _OWN]
    if "content-length" in upstream.headers:
        try:
            data = await upstream.aread()
        except httpx.HTTPError as exc:
            raise ApiError(503, f"The server's main process did not answer in full ({type(exc).__name__}).",
                           code="engine_unavailable") from None
        finally:
            await upstream.aclose()
        return Response(data, status=upstream.status_code, headers=out_headers)

    async def relay():
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:   # the main process went away mid-stream: the stream ends here
            log.warning("forwarded stream %s ended early: %s: %s", path, type(exc).__name__, exc)
        finally:
            await upstream.aclose()

    response = Response(relay(), status=upstream.status_code, headers=out_headers)
    response.timeout = None
    return response
