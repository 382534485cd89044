"""apply_gateway_config: a reloaded gateway config swaps tokens, grants and the config digest of a
running gateway app; the bind address stays."""
from __future__ import annotations

import json

from api.app import create_shared_gateway
from api.config_reload import apply_gateway_config
from api.gateway_config import load_gateway_config
from api.settings import GatewaySettings, token_digest
from aotx.runtime import RemoteRuntime
from aotx.state import Grants


def _config(path, principals: dict[str, tuple[str, list[str]]]):
    path.write_text(json.dumps({"principals": {n: {"token_sha256": token_digest(t), "actions": a}
                                               for n, (t, a) in principals.items()}}))
    return load_gateway_config(path)


async def test_a_reloaded_config_replaces_tokens_grants_and_digest(tmp_path, nats_url):
    first = _config(tmp_path / "g.json", {"alice": ("tok-a", ["shared_read", "shared_write"]),
                                          "bob": ("tok-b", ["shared_read"])})
    remote = RemoteRuntime(nats_url, "main", first.config_sha256)   # no runtime answers there
    settings = GatewaySettings(host="192.0.2.7", port=1234, token_digests=first.token_digests())
    app = create_shared_gateway(remote, first.shared_principals(), settings)
    assert app.config["AOTX_SETTINGS"].principal_for("tok-b") == "bob"

    second = _config(tmp_path / "g.json", {"alice": ("tok-a", ["shared_read"]), "carol": ("tok-c", [])})
    apply_gateway_config(app, second)
    now = app.config["AOTX_SETTINGS"]
    assert (now.host, now.port) == ("192.0.2.7", 1234)
    assert now.principal_for("tok-b") is None and now.principal_for("tok-c") == "carol"
    principals = app.extensions["aotx_shared"]["principals"]
    assert token_digest("tok-b") not in principals
    assert principals[token_digest("tok-a")].grants == Grants(shared_read=True)
    assert remote.config_sha256 == second.config_sha256 != first.config_sha256
    async with app.test_app() as test_app:   # the shared routes authenticate against the new table at once
        client = test_app.test_client()
        got = await client.get("/aotx/v1/shared/participant", headers={"Authorization": "Bearer tok-b"})
        assert got.status_code == 401
