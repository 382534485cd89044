"""GET /v1/openapi.json: the OpenAPI 3.1 document of the model surfaces' stored routes (stored Responses,
Conversations, background runs and resumable streams) and of the Idempotency-Key header on the four POST
surfaces, with every status each route answers and its native error envelope (OpenAI's; Anthropic's on
/v1/messages). Components in api.surfaces.openapi_schemas.

Authentication is the model surfaces' (api.auth): none on loopback, a bearer token (or x-api-key) elsewhere,
as for /v1/models.
"""
from __future__ import annotations

from typing import Any

from api.errors import OPENAI
from api.surfaces.openapi_schemas import IDEMPOTENCY_KEY, REPLAYED_HEADER, SCHEMAS, ref
from api.surfaces.route_kit import json_response, surface_blueprint

blueprint = surface_blueprint("openapi", OPENAI)

WHY = {
    400: "malformed input (a field, a cursor, an id, the Idempotency-Key header), a stored table full "
         "(stored_limit_reached), or stored state this app does not have; nothing stored",
    401: "no valid bearer token (not on loopback)",
    404: "unknown, deleted, expired or another caller's (read exactly as unknown)",
    409: "a conflict: previous_response_id not finished, the key's first attempt was interrupted "
         "(idempotency_key_interrupted), the stored response that answered the key was deleted or expired "
         "(idempotency_key_answer_deleted), or an item id taken meanwhile by a concurrent add",
    413: "the body or one stored command is too large",
    422: "this Idempotency-Key was used with another request body (idempotency_key_reused)",
    429: "a journal hold (journal_hold: nothing stored) or a full engine queue",
    500: "the generation failed inside the engine",
    503: "the server is shutting down, or stored state is unavailable",
}
_JSON, _SSE = "application/json", "text/event-stream"


def _errors(codes: tuple[int, ...], envelope: str = "OpenAIError") -> dict[str, Any]:
    return {str(c): {"description": WHY[c], "content": {_JSON: {"schema": ref(envelope)}}} for c in codes}


def _ok(schema: str, description: str = "OK", *, stream: bool = False, replayed: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {_JSON: {"schema": ref(schema)}}
    if stream:
        content[_SSE] = {"schema": ref("ServerSentEvent")}
    out: dict[str, Any] = {"description": description, "content": content}
    if replayed:
        out["headers"] = REPLAYED_HEADER
    return out


def _path(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {_JSON: {"schema": ref(schema)}}}


RID = _path("response_id", "a stored response's id (resp_…)")
CID = _path("conversation_id", "a conversation's id (conv_…)")
IID = _path("item_id", "an item's id in the conversation")
PAGE = [_query("after", {"type": "string"}, "list after this item id (not in the list: 400)"),
        _query("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "1..100, else 400"),
        _query("order", {"enum": ["asc", "desc"], "default": "desc"}, "asc | desc, else 400")]
READ = (400, 401, 404, 503)
WRITE = (400, 401, 404, 413, 429, 503)
GENERATE = (400, 401, 404, 409, 413, 422, 429, 500, 503)


def _surface_post(summary: str, envelope: str) -> dict[str, Any]:
    return {"post": {"summary": summary, "parameters": [IDEMPOTENCY_KEY], "requestBody": _body("SurfaceRequest"),
                     "responses": {"200": {"description": "the answer (JSON, or SSE with stream: true)",
                                           "headers": REPLAYED_HEADER,
                                           "content": {_JSON: {"schema": {"type": "object"}},
                                                       _SSE: {"schema": ref("ServerSentEvent")}}},
                                   **_errors(GENERATE, envelope)}}}


def _paths() -> dict[str, Any]:
    return {
        "/v1/responses": {"post": {
            "summary": "create a response: stored by default (store), continuing previous_response_id or "
                       "appended to a conversation, in the background (background), streamed (stream)",
            "parameters": [IDEMPOTENCY_KEY], "requestBody": _body("ResponseCreate"),
            "responses": {"200": _ok("Response", "the response (a background one queued / in_progress), or its "
                                     "events as SSE with stream: true", stream=True, replayed=True),
                          **_errors(GENERATE)}}},
        "/v1/responses/{response_id}": {
            "get": {"summary": "a stored response; with stream=true a background response's saved events after "
                               "starting_after, then the live run's until it ends",
                    "parameters": [RID, _query("stream", {"type": "boolean"}, "SSE replay (background only, else 400)"),
                                   _query("starting_after", {"type": "integer", "minimum": 0},
                                          "the sequence_number after which to replay (else from the start)")],
                    "responses": {"200": _ok("Response", "the response, or its events as SSE", stream=True),
                                  **_errors(READ)}},
            "delete": {"summary": "delete a stored response (then 404)", "parameters": [RID],
                       "responses": {"200": _ok("ResponseDeleted"), **_errors((400, 401, 404, 429, 503))}}},
        "/v1/responses/{response_id}/input_items": {"get": {
            "summary": "a stored response's input items", "parameters": [RID, *PAGE],
            "responses": {"200": _ok("ItemList"), **_errors(READ)}}},
        "/v1/responses/{response_id}/cancel": {"post": {
            "summary": "cancel a background response (another one: 400); an ended one answers as it is",
            "parameters": [RID], "responses": {"200": _ok("Response"), **_errors((400, 401, 404, 429, 503))}}},
        "/v1/conversations": {"post": {
            "summary": "create a conversation (initial items, metadata)", "requestBody": _body("ConversationCreate"),
            "responses": {"200": _ok("Conversation"), **_errors((400, 401, 413, 429, 503))}}},
        "/v1/conversations/{conversation_id}": {
            "get": {"summary": "a conversation", "parameters": [CID],
                    "responses": {"200": _ok("Conversation"), **_errors(READ)}},
            "post": {"summary": "update a conversation's metadata", "parameters": [CID],
                     "requestBody": _body("ConversationUpdate"),
                     "responses": {"200": _ok("Conversation"), **_errors(WRITE)}},
            "delete": {"summary": "delete a conversation (then 404)", "parameters": [CID],
                       "responses": {"200": _ok("ConversationDeleted"), **_errors((400, 401, 404, 429, 503))}}},
        "/v1/conversations/{conversation_id}/items": {
            "get": {"summary": "a conversation's items", "parameters": [CID, *PAGE],
                    "responses": {"200": _ok("ItemList"), **_errors(READ)}},
            "post": {"summary": "add items (at most 20 at once): answers the list of those added",
                     "parameters": [CID], "requestBody": _body("ItemsAdd"),
                     "responses": {"200": _ok("ItemList"), **_errors((*WRITE, 409))}}},
        "/v1/conversations/{conversation_id}/items/{item_id}": {
            "get": {"summary": "one item", "parameters": [CID, IID],
                    "responses": {"200": _ok("Item"), **_errors(READ)}},
            "delete": {"summary": "delete an item: answers the conversation", "parameters": [CID, IID],
                       "responses": {"200": _ok("Conversation"), **_errors((400, 401, 404, 429, 503))}}},
        "/v1/chat/completions": _surface_post("OpenAI Chat Completions (Idempotency-Key honoured)", "OpenAIError"),
        "/v1/completions": _surface_post("OpenAI Completions (Idempotency-Key honoured)", "OpenAIError"),
        "/v1/messages": _surface_post("Anthropic Messages (Idempotency-Key honoured; Anthropic's envelope)",
                                      "AnthropicError"),
        "/v1/openapi.json": {"get": {"summary": "this document",
                                     "responses": {"200": {"description": "OpenAPI 3.1",
                                                           "content": {_JSON: {"schema": {"type": "object"}}}},
                                                   **_errors((401,))}}},
    }


def openapi_document() -> dict[str, Any]:
    return {"openapi": "3.1.0",
            "info": {"title": "AOTX model surfaces: stored Responses, Conversations, Idempotency-Key",
                     "version": "v1"},
            "paths": _paths(), "security": [{"bearer": []}, {}],
            "components": {"schemas": SCHEMAS,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                          "description": "required off loopback only"}}}}


@blueprint.get("/v1/openapi.json")
async def openapi_json():
    return json_response(openapi_document())
