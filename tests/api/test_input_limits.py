"""Hostile bodies on the four surfaces (through the real blueprints over a tape-replaying service):
deep nesting, NaN/Infinity literals, invalid tool schemas, too many stop sequences. Each is a 400
in the surface's native envelope, naming what is wrong, and nothing is submitted to the engine."""
from __future__ import annotations

import json

import pytest

from aotx.strict_json import MAX_JSON_DEPTH
from api.fields import MAX_STOP_SEQUENCES
from tests.api.fake_service import FakeService, make_app

MODEL = FakeService.model_id
USER = [{"role": "user", "content": "hi"}]
BODIES = {
    "/v1/chat/completions": {"model": MODEL, "messages": USER},
    "/v1/completions": {"model": MODEL, "prompt": "hi"},
    "/v1/messages": {"model": MODEL, "messages": USER, "max_tokens": 8},
    "/v1/messages/count_tokens": {"model": MODEL, "messages": USER},
    "/v1/responses": {"model": MODEL, "input": "hi"},
}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
BAD_SCHEMA = {"type": "object", "properties": "x", "required": 5}


def tools_for(path: str, schema: dict) -> tuple[list, str]:
    """The surface's tool list carrying `schema`, and the param that names it."""
    if path.startswith("/v1/messages"):
        return [{"name": "get_weather", "input_schema": schema}], "tools[0].input_schema"
    if path == "/v1/responses":
        return [{"type": "function", "name": "get_weather", "parameters": schema}], "tools[0].parameters"
    return ([{"type": "function", "function": {"name": "get_weather", "parameters": schema}}],
            "tools[0].function.parameters")


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def client(service):
    return make_app(service).test_client()


async def post_raw(client, path: str, raw: bytes):
    resp = await client.post(path, data=raw, headers={"content-type": "application/json"})
    return resp, json.loads(await resp.get_data())


def assert_native_400(path: str, resp, body) -> str:
    assert resp.status_code == 400, body
    assert resp.headers["x-should-retry"] == "false"
    if path.startswith("/v1/messages"):
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        return body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"]


def nest(depth: int) -> object:
    value: object = "leaf"
    for k in range(depth):
        value = [value] if k % 2 else {"k": value}
    return value


# ---- item 4: nesting depth ------------------------------------------------------------------------
@pytest.mark.parametrize("path", BODIES)
async def test_deep_nesting_is_a_native_400(client, service, path):
    raw = ('{"model": "%s", "metadata": ' % MODEL + "[" * 1000 + "]" * 1000 + "}").encode()
    assert len(raw) < 2100
    resp, body = await post_raw(client, path, raw)
    assert str(MAX_JSON_DEPTH) in assert_native_400(path, resp, body)
    assert service.submitted == []


@pytest.mark.parametrize("path", BODIES)
async def test_nesting_one_past_the_limit_is_refused_and_at_the_limit_is_not(client, path):
    base = BODIES[path]
    at_limit = {**base, "metadata_extra": nest(MAX_JSON_DEPTH - 1)}   # the body object is level 1
    resp, body = await post_raw(client, path, json.dumps(at_limit).encode())
    assert resp.status_code == 200, body
    over = {**base, "metadata_extra": nest(MAX_JSON_DEPTH)}
    resp, body = await post_raw(client, path, json.dumps(over).encode())
    assert_native_400(path, resp, body)


@pytest.mark.parametrize("path", [p for p in BODIES if p != "/v1/completions"])
async def test_a_tool_schema_nested_ten_levels_is_accepted(client, path):
    schema: dict = {"type": "string"}
    for _ in range(10):
        schema = {"type": "object", "properties": {"inner": schema}, "required": ["inner"]}
    tools, _ = tools_for(path, schema)
    resp, body = await post_raw(client, path, json.dumps({**BODIES[path], "tools": tools}).encode())
    assert resp.status_code == 200, body


@pytest.mark.parametrize("path", [p for p in BODIES if p != "/v1/completions"])
async def test_the_deepest_schema_a_body_can_hold_is_checked_without_recursion_error(client, path):
    """The schema validator recurses ~8 frames per schema level: at the body's depth bound it must still
    answer (200 for a valid chain, 400 for one broken at the bottom), never a 500."""
    schema_level = 5 if path == "/v1/chat/completions" else 4   # where the tool's schema object sits
    for leaf, expected in (({"type": "string"}, 200), ({"type": 5}, 400)):
        schema: dict = leaf
        for _ in range(MAX_JSON_DEPTH - schema_level):
            schema = {"items": schema}
        tools, _ = tools_for(path, schema)
        raw = json.dumps({**BODIES[path], "tools": tools}).encode()
        resp, body = await post_raw(client, path, raw)
        assert resp.status_code == expected, body


# ---- item 6: NaN / Infinity -----------------------------------------------------------------------
@pytest.mark.parametrize("path", BODIES)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", ["temperature", "metadata"])
async def test_non_finite_numbers_are_refused_at_parse(client, service, path, literal, field):
    value = literal if field == "temperature" else '{"x": %s}' % literal
    raw = json.dumps(BODIES[path])[:-1] + f', "{field}": {value}}}'
    resp, body = await post_raw(client, path, raw.encode())
    message = assert_native_400(path, resp, body)
    assert "JSON" in message
    assert service.submitted == []


async def test_responses_never_echoes_nan(client):
    raw = b'{"model": "%s", "input": "hi", "metadata": {"x": NaN}, "temperature": NaN}' % MODEL.encode()
    resp = await client.post("/v1/responses", data=raw, headers={"content-type": "application/json"})
    text = (await resp.get_data()).decode()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} on the wire"))
    assert resp.status_code == 400


# ---- item 7: tool schemas -------------------------------------------------------------------------
@pytest.mark.parametrize("path", [p for p in BODIES if p != "/v1/completions"])
@pytest.mark.parametrize("schema", [BAD_SCHEMA, {"type": "objekt"}, {"properties": {"a": {"type": 7}}},
                                    {"required": "city"}, {"minLength": -1}, {"enum": "x"}])
async def test_invalid_tool_schema_is_a_400_naming_the_tool(client, service, path, schema):
    tools, param = tools_for(path, schema)
    resp, body = await post_raw(client, path, json.dumps({**BODIES[path], "tools": tools}).encode())
    message = assert_native_400(path, resp, body)
    assert param in message and "JSON Schema" in message
    if not path.startswith("/v1/messages"):
        assert body["error"]["param"] == param
    assert service.submitted == []


@pytest.mark.parametrize("path", [p for p in BODIES if p != "/v1/completions"])
@pytest.mark.parametrize("schema", [WEATHER, {}, {"type": "object"},
                                    {"$schema": "http://json-schema.org/draft-07/schema#", **WEATHER},
                                    {"type": "object", "properties": {"d": {"$ref": "#/$defs/d"}},
                                     "$defs": {"d": {"type": "string", "format": "date"}}}])
async def test_valid_tool_schemas_pass(client, path, schema):
    tools, _ = tools_for(path, schema)
    resp, body = await post_raw(client, path, json.dumps({**BODIES[path], "tools": tools}).encode())
    assert resp.status_code == 200, body


async def test_second_tool_is_named(client):
    tools = [{"type": "function", "function": {"name": "a", "parameters": WEATHER}},
             {"type": "function", "function": {"name": "b", "parameters": BAD_SCHEMA}}]
    resp, body = await post_raw(client, "/v1/chat/completions",
                                json.dumps({**BODIES["/v1/chat/completions"], "tools": tools}).encode())
    assert_native_400("/v1/chat/completions", resp, body)
    assert body["error"]["param"] == "tools[1].function.parameters"


# ---- item 8: stop sequences -----------------------------------------------------------------------
STOP_FIELDS = {"/v1/chat/completions": "stop", "/v1/completions": "stop", "/v1/messages": "stop_sequences"}


@pytest.mark.parametrize("path", STOP_FIELDS)
@pytest.mark.parametrize("count", [MAX_STOP_SEQUENCES + 1, 1000])
async def test_too_many_stop_sequences_is_a_400_on_every_surface(client, service, path, count):
    key = STOP_FIELDS[path]
    body = {**BODIES[path], key: [f"s{i}" for i in range(count)]}
    resp, out = await post_raw(client, path, json.dumps(body).encode())
    message = assert_native_400(path, resp, out)
    assert f"at most {MAX_STOP_SEQUENCES}" in message and key in message
    assert service.submitted == []


@pytest.mark.parametrize("path", STOP_FIELDS)
async def test_the_cap_itself_is_accepted(client, service, path):
    key = STOP_FIELDS[path]
    stops = [f"s{i}" for i in range(MAX_STOP_SEQUENCES)]
    resp, out = await post_raw(client, path, json.dumps({**BODIES[path], key: stops}).encode())
    assert resp.status_code == 200, out
    assert service.submitted[-1][1].stop == tuple(stops)
