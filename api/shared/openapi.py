"""The OpenAPI 3.1 document of the shared routes served by this blueprint."""

from __future__ import annotations

from typing import Any

_ENVELOPE = {
    "schema": {"type": "string", "const": "aotx.shared.mutation.v1"},
    "lineage": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
    "operation_key": {"type": "string", "pattern": "^[0-9a-f]{32}$", "description": "nonzero opaque 16 bytes"},
    "sequence": {"type": "string", "pattern": "^[1-9][0-9]*$", "description": "decimal string"},
}
_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
# a query counter (cursor, limit, offset): ASCII digits only, canonical, at most 20 of them
_COUNTER = {"type": "string", "pattern": "^(0|[1-9][0-9]*)$", "maxLength": 20,
            "description": "canonical decimal string of ASCII digits (no sign, no leading zero); else 400"}


def _mutation(extra: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": {**_ENVELOPE, **extra},
            "required": [*_ENVELOPE, *required]}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _responses(ok: str, *codes: int, created: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if created:
        out["201"] = {"description": "new operation", "content": {"application/json": {"schema": _ref(ok)}}}
        out["200"] = {"description": "exact retry: the existing receipt",
                      "content": {"application/json": {"schema": _ref(ok)}}}
    else:
        out["200"] = {"description": "OK", "content": {"application/json": {"schema": _ref(ok)}}}
    text = {400: "malformed input (unknown field, invalid UTF-8, zero key, bad ID); nothing changed",
            401: "no valid bearer token", 403: "grant missing", 404: "not found or not visible",
            409: "changed input, future sequence or conflict", 410: "below the retry floor (retired)",
            413: "canonical command over the command-bytes bound", 429: "journal hold; nothing changed",
            503: "runtime booting or stopped", 507: "a fixed-capacity table is full (named)",
            416: "offset beyond the saved result bytes"}
    for code in (401, 403, *codes):
        out[str(code)] = {"description": text[code], "content": {"application/json": {"schema": _ref("Error")}}}
    return out


def _list_params() -> list[dict[str, Any]]:
    return [{"name": "cursor", "in": "query", "schema": dict(_COUNTER)},
            {"name": "limit", "in": "query", "schema": dict(_COUNTER)}]


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


_MUTATION_CODES = (400, 404, 409, 410, 413, 429, 503, 507)


def openapi_document(base: str) -> dict[str, Any]:
    post = lambda summary, schema, params=(): {  # noqa: E731
        "summary": summary, "parameters": list(params),
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": _responses("Receipt", *_MUTATION_CODES, created=True)}
    paths = {
        "/capabilities": {"get": {"summary": "schema versions, models, limits, lease revisions, journal status",
                                  "responses": _responses("Capabilities")}},
        "/participant": {
            "get": {"summary": "own record, or ?participant=par-… with foreign counters null",
                    "parameters": [{"name": "participant", "in": "query", "schema": {"type": "string"}}],
                    "responses": _responses("Participant", 400, 404)},
            "post": post("register the participant", _mutation({}))},
        "/participant/retirements": {"post": post("retire receipts below retry_floor",
                                                  _mutation({"retry_floor": _ENVELOPE["sequence"]},
                                                            ("retry_floor",)))},
        "/spaces": {
            "get": {"summary": "spaces the caller can read", "parameters": _list_params(),
                    "responses": _responses("SpaceList", 400)},
            "post": post("create a space", _mutation({"id": _ID, "scope": {"enum": ["private", "room",
                                                                                   "instance"]}}))},
        "/spaces/{space}": {"get": {"summary": "one space", "parameters": [_path("space")],
                                    "responses": _responses("Space", 400, 404)}},
        "/spaces/{space}/members": {
            "get": {"summary": "explicit member rows", "parameters": [_path("space"), *_list_params()],
                    "responses": _responses("MemberList", 400, 404)},
            "post": post("set a member's rights ([] removes)", _mutation({
                "participant": {"type": "string"},
                "permissions": {"type": "array", "uniqueItems": True,
                                "items": {"enum": ["read", "write", "manage"]}}}, ("participant", "permissions")),
                [_path("space")])},
        "/spaces/{space}/conversations": {
            "get": {"summary": "conversations of a space", "parameters": [_path("space"), *_list_params()],
                    "responses": _responses("ConversationList", 400, 404)},
            "post": post("create a conversation", _mutation({"id": _ID}), [_path("space")])},
        "/conversations/{con}": {"get": {"summary": "one conversation", "parameters": [_path("con")],
                                         "responses": _responses("Conversation", 400, 404)}},
        "/operations/{op}": {"get": {"summary": "the receipt of an own operation", "parameters": [_path("op")],
                                     "responses": _responses("Receipt", 400, 404, 410)}},
        "/conversations/{con}/inputs": {"post": {
            **post("post an input: admitted and saved (202), then executed by the model; the receipt's "
                   "`execution` goes queued → running → completed | cancelled | interrupted | failed",
                   _mutation({
                       "text": {"type": "string", "description": "UTF-8; may be empty only with media; text plus "
                                "73 bytes per media link fit 2048 bytes; a reserved media control token "
                                "([image:<sha256>] or [audio:<sha256>]) in the text is refused (400)"},
                       "model": {"type": "string"},
                       "max_output_tokens": {"type": "integer", "minimum": 1, "default": 256},
                       "temperature": {"type": "number", "minimum": 0, "maximum": 2,
                                       "description": "default (absent or null): the model's, "
                                                      "GET /v1/models sampling_defaults"},
                       "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                                 "description": "default (absent or null): the model's"},
                       "pages": {"type": "integer", "minimum": 1,
                                 "description": "KV page limit; default the page grant"},
                       "media": {"type": "array", "maxItems": 8,
                                 "description": "media uploaded by the author (POST /media; else 409 "
                                                "media_not_owned), for a model with the media capability "
                                                "(else 409 unsupported_capability)", "items": {
                           "type": "object", "additionalProperties": False, "required": ["type", "sha256"],
                           "properties": {"type": {"enum": ["image", "audio"]},
                                          "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}}}},
                       ("text", "model")), [_path("con")]),
            "responses": {**_responses("Receipt", *_MUTATION_CODES, created=True),
                          "202": {"description": "new input: admission saved, execution started",
                                  "content": {"application/json": {"schema": _ref("Receipt")}}}}}},
        "/conversations/{con}/events": {"get": {
            "summary": "the conversation's inputs in conversation input order after cursor (list), or with "
                       "stream=true as SSE `input` events (id = path@order cursor; Last-Event-ID resumes when no "
                       "cursor is given) and `gap` events where retired inputs left the window",
            "parameters": [_path("con"), *_list_params(),
                           {"name": "stream", "in": "query", "schema": {"enum": ["true", "false"]}},
                           {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}}],
            "responses": {**_responses("ConversationEvents", 400, 404),
                          "200": {"description": "the list, or server-sent events with stream=true",
                                  "content": {"application/json": {"schema": _ref("ConversationEvents")},
                                              "text/event-stream": {"schema": {"type": "string"}}}}}}},
        "/conversations/{con}/cancellations": {"post": post(
            "cancel exactly the caller's input of target_sequence in this conversation",
            _mutation({"target_sequence": _ENVELOPE["sequence"]}, ("target_sequence",)), [_path("con")])},
        "/operations/{op}/result": {"get": {
            "summary": "an input's saved result bytes from offset (own or another member's, in a space the caller "
                       "can read now; an own input's result without read rights there is 403)",
            "parameters": [_path("op"), *[{"name": n, "in": "query", "schema": dict(_COUNTER)}
                                          for n in ("offset", "limit")]],
            "responses": _responses("Result", 400, 404, 409, 410, 416)}},
        "/operations/{op}/events": {"get": {
            "summary": "always SSE: `output` events (exact base64 bytes; id = path@byte cursor) as the result is "
                       "journalled, then one `end` event; Last-Event-ID resumes when no offset is given",
            "parameters": [_path("op"), {"name": "offset", "in": "query", "schema": dict(_COUNTER)},
                           {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}}],
            "responses": {**_responses("Result", 400, 404, 409, 410, 416),
                          "200": {"description": "server-sent events",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}}}}},
        "/media": {"post": {
            "summary": "upload a media blob (the raw body); stored in a NATS object store under its sha256, its "
                       "uploader recorded as its source: an input may reference only media its author uploaded",
            "requestBody": {"required": True, "content": {
                "image/*": {"schema": {"type": "string", "format": "binary"}},
                "audio/*": {"schema": {"type": "string", "format": "binary"}}}},
            "responses": {
                "201": {"description": "stored; new for this uploader",
                        "content": {"application/json": {"schema": _ref("Media")}}},
                "200": {"description": "this uploader uploaded the same bytes before",
                        "content": {"application/json": {"schema": _ref("Media")}}},
                **{str(code): {"description": why, "content": {"application/json": {"schema": _ref("Error")}}}
                   for code, why in ((400, "empty body"), (401, "no valid bearer token"),
                                     (403, "shared_write grant missing"),
                                     (413, "over the media size cap (default 8 MiB)"),
                                     (409, "this server has no media store"),
                                     (415, "Content-Type is not image/* or audio/*"),
                                     (503, "runtime booting"))}}}},
        "/spaces/{space}/memory": {"get": {
            "summary": "memory visible in a space (transitive visibility, current versions): 128-byte metadata "
                       "rows as JSON, in creation order", "parameters": [_path("space"), *_list_params()],
            "responses": _responses("MemoryList", 400, 404)}},
        "/memory/{object}": {"get": {
            "summary": "one memory metadata row and its exact payload bytes from offset",
            "parameters": [{"name": "object", "in": "path", "required": True,
                            "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
                           {"name": "offset", "in": "query", "schema": dict(_COUNTER)}],
            "responses": _responses("MemoryObject", 400, 404)}},
        "/spaces/{space}/publications": {"post": post(
            "publish a retained text memory into this space (manage rights here): its text, source and embedding "
            "are copied into distinct new objects; unsupported kinds 409",
            _mutation({"object": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
                       "source_version": _ENVELOPE["sequence"]}, ("object", "source_version")), [_path("space")])},
        "/openapi.json": {"get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI"}}}},
    }
    nullable_counter = {"type": ["string", "null"]}
    save = {"type": "object", "properties": {
        "source": {"type": ["string", "null"]}, "incarnation": {"type": ["string", "null"]},
        "generation": {"type": ["integer", "null"]}, "boot": {"type": ["string", "null"]},
        "commit_digest": {"type": ["string", "null"]}, "pending_bytes": {"type": ["integer", "null"]},
        "disk_error": {"type": ["string", "null"]}}}
    schemas = {
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}}},
            "request_id": {"type": "string", "description": "the request's id (also the x-request-id header)"}}},
        "Media": {"type": "object", "required": ["sha256", "type", "byte_length"], "properties": {
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"}, "type": {"enum": ["image", "audio"]},
            "byte_length": {"type": "integer", "minimum": 1}}},
        "Receipt": {"type": "object", "properties": {
            "operation": {"type": "string"}, "sequence": {"type": "string"}, "kind": {"type": "string"},
            "status_code": {"type": "integer"},
            "status": {"type": "object", "properties": {k: {"type": "string"} for k in
                                                        ("transport", "commit", "admission", "terminal")}},
            "resource": {"type": ["string", "null"]}, "command_bytes": {"type": "integer"},
            "result_bytes": {"type": "integer"}, "save": save,
            "execution": {"enum": ["queued", "running", "completed", "cancelled", "interrupted", "failed",
                                   "deadline_exceeded"],
                          "description": "inputs only"},
            "model_digest": {"type": "string"}, "page_limit": {"type": "integer"},
            "cancel_requested": {"type": "boolean"}, "output_bytes": {"type": "integer"},
            "lease": {"type": ["object", "null"]}, "result": {"type": ["object", "null"]}}},
        "ConversationEvents": {"type": "object", "properties": {
            "conversation": {"type": "string"}, "events": {"type": "array", "items": {"type": "object"}},
            "floor": {"type": "string"}, "gap": {"type": ["object", "null"]}, "latest": {"type": "string"},
            "cursor": {"type": "string"}, "next_cursor": nullable_counter}},
        "Result": {"type": "object", "properties": {
            "operation": {"type": "string"}, "offset": {"type": "integer"},
            "bytes": {"type": "string", "contentEncoding": "base64"}, "byte_length": {"type": "integer"},
            "next_offset": {"type": "integer"}, "text": {"type": ["string", "null"]},
            "execution": {"type": "string"}, "complete": {"type": "boolean"}, "saved_bytes": {"type": "integer"},
            "input_tokens": {"type": ["integer", "null"]}, "output_tokens": {"type": ["integer", "null"]},
            "finish": {"type": ["string", "null"]}, "error": {"type": ["string", "null"]}}},
        "Participant": {"type": "object", "properties": {
            "registered": {"type": "boolean"}, "participant": {"type": ["string", "null"]},
            "lineage": {"type": "string"}, "next_sequence": nullable_counter, "retry_floor": nullable_counter}},
        "Space": {"type": "object", "properties": {"id": {"type": "string"}, "scope": {"type": "string"},
                                                   "owner": {"type": "string"},
                                                   "permissions": {"type": "array", "items": {"type": "string"}}}},
        "Conversation": {"type": "object", "properties": {"id": {"type": "string"}, "space": {"type": "string"},
                                                          "creator": {"type": "string"}}},
        "SpaceList": {"type": "object", "properties": {"spaces": {"type": "array", "items": _ref("Space")},
                                                       "next_cursor": nullable_counter}},
        "MemberList": {"type": "object", "properties": {"members": {"type": "array", "items": {"type": "object"}},
                                                        "next_cursor": nullable_counter}},
        "ConversationList": {"type": "object", "properties": {
            "conversations": {"type": "array", "items": _ref("Conversation")}, "next_cursor": nullable_counter}},
        "Capabilities": {"type": "object"},
        "MemoryRow": {"type": "object", "required": ["object", "version", "kind", "scope", "owner", "room",
                                                     "byte_length", "source", "actor"], "properties": {
            "object": {"type": "string"}, "version": {"type": "string"},
            "kind": {"enum": ["text", "source", "embedding", "interpretation"]},
            "scope": {"enum": ["private", "room", "instance"]}, "owner": {"type": "string"},
            "room": {"type": ["string", "null"]}, "byte_length": {"type": "string"},
            "source": {"type": ["string", "null"]}, "actor": {"type": "string"}}},
        "MemoryList": {"type": "object", "properties": {"memory": {"type": "array", "items": _ref("MemoryRow")},
                                                        "next_cursor": nullable_counter}},
        "MemoryObject": {"type": "object", "properties": {
            "row": _ref("MemoryRow"), "offset": {"type": "string"}, "byte_length": {"type": "string"},
            "data": {"type": "string", "contentEncoding": "base64"}, "next_offset": {"type": "string"}}},
    }
    return {"openapi": "3.1.0", "info": {"title": "AOTX shared conversations", "version": "v1"},
            "servers": [{"url": base}], "paths": paths,
            "security": [{"bearer": []}],
            "components": {"schemas": schemas,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}
