"""A 405 keeps the path's native envelope and says which methods the resource takes (RFC 9110 §15.5.6:
the `Allow` header)."""
from __future__ import annotations

import pytest

from api.app import create_app
from api.settings import GatewaySettings
from tests.api.fake_service import FakeService


def allowed(resp) -> set[str]:
    return {m.strip() for m in resp.headers["Allow"].split(",")}


@pytest.fixture
def client():
    return create_app(FakeService(), GatewaySettings()).test_client()


@pytest.mark.parametrize("method,path,anthropic", [
    ("GET", "/v1/chat/completions", False), ("PUT", "/v1/completions", False),
    ("DELETE", "/v1/responses", False), ("GET", "/v1/messages", True),
    ("GET", "/v1/messages/count_tokens", True)])
async def test_surface_405_has_allow_and_native_envelope(client, method, path, anthropic):
    resp = await client.open(path, method=method)
    assert resp.status_code == 405
    assert "POST" in allowed(resp) and method not in allowed(resp)
    body = await resp.get_json()
    if anthropic:
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["type"] == "invalid_request_error" and set(body["error"]) == {
            "message", "type", "param", "code"}
    assert resp.content_type.startswith("application/json")


async def test_ops_405_has_allow(client):
    resp = await client.post("/health")
    assert resp.status_code == 405 and "GET" in allowed(resp) and "POST" not in allowed(resp)
    assert "error" in await resp.get_json()
