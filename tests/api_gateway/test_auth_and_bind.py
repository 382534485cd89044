"""Bind policy and bearer tokens: loopback accepts any key, other addresses need the gateway config."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from api.app import create_app
from api.gateway_config import GatewayConfigError, load_token_digests
from api.settings import GatewaySettings, is_loopback, token_digest


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")


def test_serve_refuses_public_bind_without_config():
    exe = Path(sys.executable).with_name("aotx")
    r = subprocess.run([str(exe), "serve", "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "requires bearer tokens" in r.stderr


def test_gateway_config_validation(tmp_path):
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps({"principals": {"alice": {"token_sha256": "short"}}}))
    with pytest.raises(GatewayConfigError, match="alice"):
        load_token_digests(bad)
    bad.write_text("{}")
    with pytest.raises(GatewayConfigError, match="no principals"):
        load_token_digests(bad)
    good = tmp_path / "ok.json"
    good.write_text(json.dumps({"principals": {"alice": {"token_sha256": token_digest("s3cret"),
                                                         "actions": ["shared_read"]}}}))
    assert load_token_digests(good) == {token_digest("s3cret"): "alice"}


from aotx.sampling_defaults import defaults_for  # noqa: E402  (the stub's model defaults)


class _Routes:
    def snapshot(self):
        from aotx.route_metrics import LANES, SURFACES
        return {(s, l): 0 for s in SURFACES for l in LANES}


class _IdleService:
    """Just enough of a service for routes that never reach the engine (no model is needed to test auth)."""
    model_id = "smollm2-135m-instruct"
    backend_name = "numpy"
    created = 0
    context_length = 8192
    routes = _Routes()
    sampling_defaults = defaults_for("smollm2-135m-instruct")

    def known_model(self, name):
        return name == self.model_id

    def start(self):
        pass

    async def stop(self):
        pass


async def test_public_bind_requires_a_valid_token():
    settings = GatewaySettings(host="0.0.0.0", token_digests={token_digest("s3cret"): "alice"})
    app = create_app(_IdleService(), settings)
    client = app.test_client()
    r = await client.get("/v1/models")
    assert r.status_code == 401
    assert (await r.get_json())["error"]["code"] == "invalid_api_key"
    r = await client.post("/v1/messages", json={})
    assert r.status_code == 401 and (await r.get_json())["error"]["type"] == "authentication_error"
    r = await client.get("/v1/models", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = await client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200
    r = await client.get("/v1/models", headers={"x-api-key": "s3cret"})
    assert r.status_code == 200
    assert (await client.get("/health")).status_code == 200


async def test_loopback_accepts_any_key():
    app = create_app(_IdleService(), GatewaySettings())
    r = await app.test_client().get("/v1/models", headers={"Authorization": "Bearer whatever"})
    assert r.status_code == 200
