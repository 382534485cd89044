"""Errors on the wire: one exception type, three native envelopes.

OpenAI surfaces (chat, completions, responses, and the ops routes):
    {"error": {"message", "type", "param", "code"}}
Anthropic Messages (paths under /v1/messages), with the request id as Anthropic's API sends it:
    {"type": "error", "error": {"type", "message"}, "request_id"}
Shared conversations (paths under /aotx/v1/shared):
    {"error": {"type", "message"}}
  framework errors such as 405 through error_response; the shared routes raise ApiError with their
  `type` and render it with shared_error_response, through the app's JSON provider like every other
  shared answer.
Framework errors keep their headers (a 405's `Allow`, RFC 9110 §15.5.6).
Every error answer of a request carries that request's id as a top-level `request_id` (the same id as
the `x-request-id` header and the `aotx.http` log record: api.request_ids), in all three envelopes;
an error event inside a stream carries none (it is not the answer of a request).
"""
from __future__ import annotations

from http import HTTPStatus

from quart import Response

from aotx import strict_json
from aotx.engine import ENGINE_STOPPED
from aotx.engine_wire import ENGINE_UNAVAILABLE
from api.auth import SHARED_PREFIX
from api.request_ids import current_request_id

OPENAI = "openai"
ANTHROPIC = "anthropic"
SHARED = "shared"

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                 403: "invalid_request_error", 404: "invalid_request_error",
                 405: "invalid_request_error", 409: "invalid_request_error",
                 413: "invalid_request_error", 422: "invalid_request_error",
                 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
_OPENAI_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded",
                 503: "server_is_overloaded"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error",
                    409: "invalid_request_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 503: "overloaded_error",
                    504: "timeout_error"}
# The SDKs retry 408, 409, 429 and >= 500. Only overload and rate limits can
# succeed on retry here; everything else would just repeat the same failure.
_RETRYABLE = {408, 429, 503}


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, type: str | None = None,
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    @property
    def should_retry(self) -> bool:
        return self.status in _RETRYABLE


def openai_body(err: ApiError) -> dict:
    etype = err.type or _OPENAI_TYPES.get(
        err.status, "server_error" if err.status >= 500 else "invalid_request_error")
    return {"error": {"message": err.message, "type": etype, "param": err.param,
                      "code": err.code if err.code is not None else _OPENAI_CODES.get(err.status)}}


def anthropic_type(status: int) -> str:
    if status in _ANTHROPIC_TYPES:
        return _ANTHROPIC_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def anthropic_body(err: ApiError) -> dict:
    # A caller-chosen `type` is OpenAI vocabulary; Anthropic's type follows the status.
    body = {"type": "error", "error": {"type": anthropic_type(err.status), "message": err.message}}
    rid = current_request_id()
    if rid is not None:  # inside a request (a mid-stream error event carries none, as Anthropic's)
        body["request_id"] = rid
    return body


def with_request_id(body: dict) -> dict:
    """The error body with this request's id added at the top level (none outside a request)."""
    return with_id(body, current_request_id())


def with_id(body: dict, rid: str | None) -> dict:
    """`body` with `rid` added at the top level (unless it has one, or rid is None)."""
    if rid is None or "request_id" in body:
        return body
    return {**body, "request_id": rid}


def shared_body(err: ApiError) -> dict:
    try:
        phrase = HTTPStatus(err.status).phrase
    except ValueError:
        phrase = "error"
    return {"error": {"type": err.type or phrase.lower().replace(" ", "_").replace("-", "_"),
                      "message": err.message}}


def shared_error_response(err: ApiError, headers: dict[str, str] | None = None) -> Response:
    """A shared route's error: the shared envelope, rendered as every shared answer is (jsonify)."""
    from quart import current_app
    response = current_app.json.response(with_request_id(shared_body(err)))
    response.status_code = err.status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def envelope_for_path(path: str) -> str:
    """Which envelope a request path answers in."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return ANTHROPIC
    if path == SHARED_PREFIX or path.startswith(SHARED_PREFIX + "/"):
        return SHARED
    return OPENAI


def error_body(err: ApiError, envelope: str) -> dict:
    if envelope == ANTHROPIC:
        return anthropic_body(err)
    return shared_body(err) if envelope == SHARED else openai_body(err)


def error_response(err: ApiError, envelope: str, headers: dict[str, str] | None = None) -> Response:
    out = dict(headers or {})
    if not err.should_retry:
        out["x-should-retry"] = "false"
    return Response(strict_json.dumps(with_request_id(error_body(err, envelope))), status=err.status,
                    content_type="application/json", headers=out)


def model_not_found(model: str) -> ApiError:
    return ApiError(404, f"The model '{model}' does not exist or you do not have access to it.",
                    param="model", code="model_not_found")


_PROMPT_CODES = ("context_length_exceeded", "invalid_prompt", "empty_prompt")


def rejection_error(code: str, message: str, prompt_param: str = "messages") -> ApiError:
    """An engine admission refusal (aotx.engine.RequestRejected) as an API error;
    a refusal of the prompt names the surface's own prompt field."""
    if code == "queue_full":
        return ApiError(429, message or "The server is at capacity; retry later.",
                        code="rate_limit_exceeded")
    if code == "engine_stopped":
        return ApiError(503, message or "The server is shutting down.", code=code)
    if code == "engine_unavailable":   # an HTTP worker without its engine process (aotx.serving_remote)
        return ApiError(503, message or "The engine is unavailable; retry later.", code=code)
    if code in _PROMPT_CODES:
        return ApiError(400, message, param=prompt_param, code=code)
    return ApiError(400, message, code=code)


def shutting_down(message: str = "The server is shutting down and takes no new requests.") -> ApiError:
    """503: OpenAI `server_error`, Anthropic `overloaded_error`; the SDKs may retry it elsewhere."""
    return ApiError(503, message, code="server_shutting_down")


def engine_failure(message: str | None) -> ApiError:
    """A generation that failed after it began; one the shutdown stopped (the engine ended it with
    ENGINE_STOPPED) is a 503 shutting-down error, every other failure a 500."""
    if message == ENGINE_STOPPED:
        return shutting_down("The server is shutting down; the generation was stopped before it finished.")
    if message is not None and message.startswith(ENGINE_UNAVAILABLE):   # the engine process went away
        return ApiError(503, f"Generation failed: {message}; retry later.", code="engine_unavailable")
    return ApiError(500, f"Generation failed: {message or 'internal error'}")


def register_error_handlers(app) -> None:
    """Render ApiError and HTTP errors (404, 405, 413, ...) in the path's native envelope, keeping
    the framework's headers (Allow, WWW-Authenticate, ...) except its HTML content type."""
    from quart import request
    from werkzeug.exceptions import HTTPException

    @app.errorhandler(ApiError)
    async def _api_error(err: ApiError):
        return error_response(err, envelope_for_path(request.path))

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException):
        status = exc.code or 500
        message = exc.description or exc.name
        headers = {k: v for k, v in exc.get_headers() if k.lower() != "content-type"}
        return error_response(ApiError(status, message), envelope_for_path(request.path), headers)
