"""A 4xx answer's body names its request: `request_id` at the top level of all three envelopes (OpenAI,
Anthropic, shared), the same id as the x-request-id header and as the structured `aotx.http` log record
(ops.logs renders it as JSON with the same field); a runtime refusal of the shared routes carries it too."""
from __future__ import annotations

import json
import logging

import httpx
import pytest

from api.app import create_app
from api.settings import GatewaySettings
from ops.logs import JsonFormatter
from tests.api.fake_service import FakeService

MODEL = FakeService.model_id
CASES = [
    ("POST", "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}, 404),
    ("POST", "/v1/responses", {"model": MODEL, "input": "hi", "temperature": 9}, 400),
    ("POST", "/v1/messages", {"model": MODEL}, 400),
    ("GET", "/v1/chat/completions", None, 405),
    ("GET", "/aotx/v1/shared/nothing-here", None, 404),
]


@pytest.fixture
def client():
    return create_app(FakeService(), GatewaySettings()).test_client()


@pytest.mark.parametrize("method,path,body,status", CASES)
async def test_a_4xx_body_names_the_request_id_of_its_header_and_log_record(client, caplog, method, path, body, status):
    caplog.set_level(logging.INFO, logger="aotx.http")
    resp = await client.open(path, method=method, **({} if body is None else {"json": body}))
    doc = json.loads(await resp.get_data())
    assert resp.status_code == status, doc
    rid = resp.headers["x-request-id"]
    assert doc["request_id"] == rid and "error" in doc
    lines = [r for r in caplog.records if r.name == "aotx.http"]
    assert [r.fields["request_id"] for r in lines] == [rid]
    assert json.loads(JsonFormatter().format(lines[0]))["request_id"] == rid


async def test_a_client_sent_id_is_the_one_in_the_body(client):
    resp = await client.post("/v1/chat/completions", json={"model": "nope", "messages": []},
                             headers={"x-request-id": "trace-4xx"})
    assert resp.status_code in (400, 404)
    assert json.loads(await resp.get_data())["request_id"] == "trace-4xx"


def test_a_shared_runtime_refusal_names_the_request(server):
    token = (server.var / "tokens" / "alice").read_text().strip()
    r = httpx.get(f"{server.base_url}/aotx/v1/shared/conversations/con-{'0' * 32}-{'1' * 32}",
                  headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 404 and r.json()["request_id"] == r.headers["x-request-id"], r.text
    assert set(r.json()) == {"error", "request_id"}
