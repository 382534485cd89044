"""Every answer of the gateway carries a request id (`x-request-id`, and `request-id` as Anthropic's
API sends it): buffered, streamed, errors, unknown routes; a sane client-sent id is honoured; Anthropic
error bodies carry it as `request_id`; the request log line carries it at info level."""
from __future__ import annotations

import logging
import re

import pytest

from api.app import create_app
from api.settings import GatewaySettings
from tests.api.fake_service import FakeService

MODEL = FakeService.model_id
USER = [{"role": "user", "content": "hi"}]
GENERATED = re.compile(r"req_[0-9a-f]{24}")
REQUESTS = [
    ("POST", "/v1/chat/completions", {"model": MODEL, "messages": USER}),
    ("POST", "/v1/chat/completions", {"model": MODEL, "messages": USER, "stream": True}),
    ("POST", "/v1/completions", {"model": MODEL, "prompt": "hi"}),
    ("POST", "/v1/completions", {"model": MODEL, "prompt": "hi", "stream": True}),
    ("POST", "/v1/messages", {"model": MODEL, "messages": USER}),
    ("POST", "/v1/messages", {"model": MODEL, "messages": USER, "stream": True}),
    ("POST", "/v1/messages/count_tokens", {"model": MODEL, "messages": USER}),
    ("POST", "/v1/responses", {"model": MODEL, "input": "hi"}),
    ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "stream": True}),
    ("POST", "/v1/chat/completions", {"model": "nope", "messages": USER}),       # 404
    ("POST", "/v1/messages", {"model": MODEL}),                                   # 400
    ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "temperature": 9}),  # 400
    ("GET", "/v1/chat/completions", None),                                        # 405
    ("GET", "/v1/messages", None),                                                # 405
    ("GET", "/v1/nothing-here", None),                                            # 404
    ("GET", "/v1/models/nope", None),                                             # 404 (ApiError)
]


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def client(service):
    return create_app(service, GatewaySettings()).test_client()


async def call(client, method, path, body=None, headers=None):
    extra = {} if body is None else {"json": body}
    resp = await client.open(path, method=method, headers=headers or {}, **extra)
    data = await resp.get_data()
    return resp, data


@pytest.mark.parametrize("method,path,body", REQUESTS)
async def test_every_answer_has_a_generated_request_id(client, method, path, body):
    resp, data = await call(client, method, path, body)
    rid = resp.headers.get("x-request-id")
    assert rid is not None and GENERATED.fullmatch(rid), (resp.status_code, dict(resp.headers))
    assert resp.headers["request-id"] == rid
    if path.startswith("/v1/messages") and resp.status_code >= 400:
        doc = await resp.get_json()
        assert doc["type"] == "error" and doc["request_id"] == rid


async def test_ids_differ_between_requests(client):
    seen = set()
    for _ in range(3):
        resp, _ = await call(client, *REQUESTS[0])
        seen.add(resp.headers["x-request-id"])
    assert len(seen) == 3


@pytest.mark.parametrize("sent", ["my-trace.id_1:2", "0f8fad5b-d9cb-469f-a165-70867728950e",
                                  "req_" + "a" * 60, "A"])
async def test_a_sane_client_id_is_honoured(client, sent):
    for method, path, body in (REQUESTS[0], REQUESTS[1], REQUESTS[10]):
        resp, _ = await call(client, method, path, body, {"x-request-id": sent})
        assert resp.headers["x-request-id"] == sent
        if resp.status_code == 400:
            assert (await resp.get_json())["request_id"] == sent


@pytest.mark.parametrize("sent", ["", " ", "a b", "x" * 129, "é", "a\tb", "a,b", "<script>", "id;drop"])
async def test_an_insane_client_id_is_replaced(client, sent):
    resp, _ = await call(client, *REQUESTS[0], headers={"x-request-id": sent})
    assert GENERATED.fullmatch(resp.headers["x-request-id"])


async def test_unauthenticated_and_unexpected_failures_carry_an_id(service):
    client = create_app(service, GatewaySettings(host="0.0.0.0")).test_client()  # tokens required
    resp, _ = await call(client, *REQUESTS[4])
    assert resp.status_code == 401 and GENERATED.fullmatch(resp.headers["x-request-id"])
    assert (await resp.get_json())["request_id"] == resp.headers["x-request-id"]

    def boom(*_a, **_k):
        raise RuntimeError("unexpected")
    service.chat_prompt = boom
    client = create_app(service, GatewaySettings()).test_client()
    resp, _ = await call(client, *REQUESTS[4], headers={"x-request-id": "trace-500"})
    assert resp.status_code == 500 and resp.headers["x-request-id"] == "trace-500"
    assert (await resp.get_json())["request_id"] == "trace-500"


async def test_the_request_line_carries_the_id_at_info_and_is_quiet_above(client, caplog):
    caplog.set_level(logging.WARNING)
    await call(client, *REQUESTS[0])
    assert not [r for r in caplog.records if r.name == "aotx.http"]
    caplog.set_level(logging.INFO, logger="aotx.http")
    resp, _ = await call(client, *REQUESTS[1], headers={"x-request-id": "trace-log"})
    lines = [r for r in caplog.records if r.name == "aotx.http"]
    assert len(lines) == 1
    fields = lines[0].fields
    assert fields["request_id"] == "trace-log" and fields["method"] == "POST"
    assert fields["path"] == "/v1/chat/completions" and fields["status"] == 200


async def test_unexpected_error_log_names_the_request(service, caplog):
    def boom(*_a, **_k):
        raise RuntimeError("unexpected")
    service.chat_prompt = boom
    client = create_app(service, GatewaySettings()).test_client()
    await call(client, *REQUESTS[0], headers={"x-request-id": "trace-err"})
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "aotx.gateway"]
    assert errors and errors[0].fields["request_id"] == "trace-err"


@pytest.mark.server
async def test_ops_routes_and_a_live_stream_carry_ids(app):
    client = app.test_client()
    model = app.extensions["aotx"].model_id
    for path in ("/health", "/v1/models", f"/v1/models/{model}", "/metrics", "/v1/stats"):
        resp = await client.get(path)
        assert resp.status_code == 200 and GENERATED.fullmatch(resp.headers["x-request-id"]), path
    resp = await client.post("/v1/chat/completions", headers={"x-request-id": "live-1"}, json={
        "model": model, "messages": USER, "max_tokens": 2, "stream": True})
    await resp.get_data()
    assert resp.headers["x-request-id"] == "live-1"
