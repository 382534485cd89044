"""The components of the model surfaces' OpenAPI document (api.surfaces.openapi): the objects the stored
routes answer, their request bodies, the two error envelopes and the Idempotency-Key header."""
from __future__ import annotations

from typing import Any

KEY = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
_STR = {"type": "string"}
_NULL_STR = {"type": ["string", "null"]}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


_METADATA = {"type": ["object", "null"], "maxProperties": 16,
             "propertyNames": {"maxLength": 64}, "additionalProperties": {"type": "string", "maxLength": 512},
             "description": "OpenAI's metadata: at most 16 pairs, keys ≤ 64 characters, values strings ≤ 512; "
                            "else 400"}
def _when(kind: str, required: tuple[str, ...], **props: Any) -> dict[str, Any]:
    return {"if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
            "then": {"required": list(required), "properties": props}}


# what the server checks of an item (api.surfaces.responses.request.parse_input, api.surfaces.response_items);
# other fields are kept as sent
_ITEM = {"type": "object", "properties": {
    "type": {"enum": ["message", "function_call", "function_call_output", "reasoning"], "default": "message"},
    "id": {**_STR, "description": "kept when valid and not taken, else a new id of the type's prefix"},
    "status": {"enum": ["in_progress", "completed", "incomplete", None],
               "description": "absent or null: completed (messages, function calls and their outputs)"}},
    "allOf": [_when("message", ("role", "content"), role={"enum": ["user", "assistant", "system", "developer"]},
                    content={"type": ["string", "array"]}),
              _when("function_call", ("call_id", "name", "arguments"), call_id=_STR, name=_STR, arguments=_STR),
              _when("function_call_output", ("call_id", "output"), call_id=_STR,
                    output={"type": ["string", "array"]})]}
_INPUT = {"oneOf": [_STR, {"type": "array", "items": ref("InputItem")}]}

SCHEMAS: dict[str, Any] = {
    "OpenAIError": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["message", "type", "param", "code"], "properties": {
            "message": _STR, "type": _STR, "param": _NULL_STR, "code": _NULL_STR}}, "request_id": _STR}},
    "AnthropicError": {"type": "object", "required": ["type", "error"], "properties": {
        "type": {"const": "error"}, "request_id": _STR,
        "error": {"type": "object", "required": ["type", "message"],
                  "properties": {"type": _STR, "message": _STR}}}},
    "InputItem": _ITEM,
    "Item": {**_ITEM, "required": ["type", "id"]},   # as stored: with its type, id (and status) always
    "ItemList": {"type": "object", "required": ["object", "data", "first_id", "last_id", "has_more"],
                 "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": ref("Item")},
                                "first_id": _NULL_STR, "last_id": _NULL_STR, "has_more": {"type": "boolean"}}},
    "Response": {"type": "object", "required": ["id", "object", "created_at", "model", "status", "output"],
                 "properties": {
                     "id": _STR, "object": {"const": "response"}, "created_at": {"type": "integer"},
                     "model": _STR,
                     "status": {"enum": ["queued", "in_progress", "completed", "incomplete", "failed",
                                         "cancelled"]},
                     "background": {"type": ["boolean", "null"]}, "store": {"type": ["boolean", "null"]},
                     "previous_response_id": _NULL_STR,
                     "conversation": {"type": ["object", "null"], "properties": {"id": _STR}},
                     "instructions": {"type": ["string", "array", "null"]}, "metadata": _METADATA,
                     "output": {"type": "array", "items": {"type": "object"}},
                     "error": {"type": ["object", "null"]}, "incomplete_details": {"type": ["object", "null"]},
                     "usage": {"type": ["object", "null"]}, "completed_at": {"type": ["integer", "null"]},
                     "truncation": {"enum": ["auto", "disabled", None]}}},
    "ResponseDeleted": {"type": "object", "required": ["id", "object", "deleted"], "properties": {
        "id": _STR, "object": {"const": "response"}, "deleted": {"const": True}}},
    "ResponseCreate": {"type": "object", "required": ["model"], "properties": {
        "model": _STR, "input": _INPUT, "instructions": _NULL_STR,
        "store": {"type": ["boolean", "null"], "default": True,
                  "description": "keep the whole response (input and output items, usage, status, metadata)"},
        "previous_response_id": {**_NULL_STR, "description": "continue a stored chain (every earlier input and "
                                 "output item, instructions excepted); unknown or deleted: 404; with "
                                 "'conversation': 400; a response not finished yet: 409"},
        "conversation": {"description": "append this response's input and output items to a conversation "
                         "(needs store); unknown: 404",
                         "oneOf": [_STR, {"type": "object", "required": ["id"], "properties": {"id": _STR}},
                                   {"type": "null"}]},
        "background": {"type": ["boolean", "null"], "description": "answer at once (queued / in_progress) and "
                       "run on the engine; needs store; poll with GET, stream again with ?stream=true"},
        "truncation": {"enum": ["auto", "disabled", None], "default": "disabled",
                       "description": "a chain longer than the context: 400 naming it, or with 'auto' the "
                                      "oldest items dropped"},
        "metadata": _METADATA, "stream": {"type": ["boolean", "null"]},
        "max_output_tokens": {"type": ["integer", "null"], "minimum": 1},
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "tools": {"type": ["array", "null"]}, "tool_choice": {}, "user": _NULL_STR}},
    "Conversation": {"type": "object", "required": ["id", "object", "created_at", "metadata"], "properties": {
        "id": _STR, "object": {"const": "conversation"}, "created_at": {"type": "integer"}, "metadata": _METADATA}},
    "ConversationDeleted": {"type": "object", "required": ["id", "object", "deleted"], "properties": {
        "id": _STR, "object": {"const": "conversation.deleted"}, "deleted": {"const": True}}},
    "ConversationCreate": {"type": "object", "properties": {
        "metadata": _METADATA,
        "items": {"type": ["array", "null"], "maxItems": 20, "items": ref("InputItem"),
                  "description": "initial items, at most 20"}}},
    "ConversationUpdate": {"type": "object", "required": ["metadata"], "properties": {"metadata": _METADATA}},
    "ItemsAdd": {"type": "object", "required": ["items"], "properties": {
        "items": {"type": "array", "minItems": 1, "maxItems": 20, "items": ref("InputItem")}}},
    "ServerSentEvent": {"type": "object", "required": ["data"], "description": "one event of a stream (the "
                        "Responses events carry their `sequence_number` in `data`, a JSON object)", "properties": {
        "event": _STR, "data": {**_STR, "contentMediaType": "application/json"}, "id": _STR}},
    "SurfaceRequest": {"type": "object", "description": "the surface's own request body (OpenAI's Chat "
                       "Completions and Completions, Anthropic's Messages); not described here"},
}

IDEMPOTENCY_KEY = {
    "name": KEY, "in": "header", "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 257, "pattern": "^[\\x20-\\x7e]+$"},
    "description": "Run this request once (Stripe's header and the IETF idempotency-key draft): 1..255 "
                   "printable ASCII characters, bare or as a Structured Field string (\"...\"), sent once "
                   "(else 400). The first request with a key runs and its whole answer is saved (the JSON, or "
                   "every event of a stream); a repeat with the same body (the same JSON value) gets the saved "
                   "answer byte for byte with `Idempotent-Replayed: true` (a repeat while the first runs "
                   "follows the same generation); the same key with another body is a 422; a first attempt "
                   "cut by a restart is a 409. Keys are scoped to the caller and the surface, kept "
                   "--idempotency-ttl (default 24 h). An app without stored state answers 400."}
REPLAYED_HEADER = {REPLAYED: {"description": "`true` when this answer is a replay of the key's first attempt",
                              "schema": {"const": "true"}}}
