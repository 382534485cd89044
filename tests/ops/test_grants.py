"""Grant files: issued from the gateway config without tokens; the runtime boots only with fresh ones."""
from __future__ import annotations

import datetime as dt
import json
import stat

import pytest

from api.gateway_config import GatewayConfigError, ensure_dev_config, load_gateway_config
from api.shared import principals_from_gateway_config, token_sha256
from aotx.runtime_file import GrantsError, load_grants, make_grants, pack_shared, write_grants
from ops.cli import main

UTC = dt.timezone.utc


def test_dev_config_tokens_mode_0600_and_reused(tmp_path):
    config, tokens, created = ensure_dev_config(tmp_path / "var")
    assert created
    names = sorted(p.name for p in tokens.iterdir())
    assert names == ["alice", "bob"]
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o700
    secrets = {}
    for name in names:
        assert stat.S_IMODE((tokens / name).stat().st_mode) == 0o600
        secrets[name] = (tokens / name).read_text().strip()
    text = config.read_text()
    assert all(tok not in text for tok in secrets.values())  # only digests in the config
    cfg = load_gateway_config(config)
    assert cfg.token_digests() == {token_sha256(t): n for n, t in secrets.items()}
    assert cfg.actions() == {n: ["shared_manage", "shared_read", "shared_write"] for n in names}
    # one format for both checks: the shared blueprint reads the same file
    assert principals_from_gateway_config(config) == cfg.shared_principals()
    before = config.read_bytes()
    _, _, created = ensure_dev_config(tmp_path / "var")
    assert not created and config.read_bytes() == before
    assert (tokens / "alice").read_text().strip() == secrets["alice"]


def test_gateway_config_refusals(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"principals": {"a": {"token_sha256": "x"}}}))
    with pytest.raises(GatewayConfigError, match="token_sha256"):
        load_gateway_config(path)
    path.write_text(json.dumps({"principals": {"a": {"token_sha256": "a" * 64, "actions": "shared_read"}}}))
    with pytest.raises(GatewayConfigError, match="actions must be a list"):
        load_gateway_config(path)


def test_aotx_grants_writes_no_tokens_and_loads_fresh(tmp_path):
    config, tokens, _ = ensure_dev_config(tmp_path / "var")
    out = tmp_path / "grants"
    assert main(["grants", "--config", str(config), "--out", str(out)]) == 0
    text = (out / "grants.json").read_text()
    for name in ("alice", "bob"):
        assert (tokens / name).read_text().strip() not in text
    cfg = load_gateway_config(config)
    assert cfg.token_digests().keys().isdisjoint(text.split('"'))  # not even the digests
    g = load_grants(out, config_sha256=cfg.config_sha256)
    assert g.actions_of("alice") == {"shared_read", "shared_write", "shared_manage"}
    assert g.actions_of("mallory") == frozenset()


def test_freshness_rules(tmp_path):
    issued = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    write_grants(tmp_path, {"alice": ["shared_read"]}, "c" * 64, now=issued)
    assert load_grants(tmp_path, now=issued + dt.timedelta(hours=23)).actions_of("alice") == {"shared_read"}
    with pytest.raises(GrantsError, match=r"stale: issued at 2026-11-01T12:00:00Z, 25.0 h ago, older than the "
                                          r"24 h limit; issue fresh grants with `aotx grants`"):
        load_grants(tmp_path, now=issued + dt.timedelta(hours=25))
    assert load_grants(tmp_path, now=issued + dt.timedelta(hours=25), max_age_s=48 * 3600)
    with pytest.raises(GrantsError, match="in the future"):
        load_grants(tmp_path, now=issued - dt.timedelta(hours=1))
    with pytest.raises(GrantsError, match="issued for gateway config cccccccccccc…, not the current dddd"):
        load_grants(tmp_path, now=issued, config_sha256="d" * 64)
    doc = json.loads((tmp_path / "grants.json").read_text())
    doc["principals"]["alice"].append("shared_manage")  # a hand edit
    (tmp_path / "grants.json").write_text(json.dumps(doc))
    with pytest.raises(GrantsError, match="digest does not match"):
        load_grants(tmp_path, now=issued)
    (tmp_path / "grants.json").unlink()
    with pytest.raises(GrantsError, match="does not exist"):
        load_grants(tmp_path)


def test_grant_bytes_are_canonical():
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    data = make_grants({"bob": ["shared_write", "shared_read", "other"]}, "0" * 64, now)
    doc = json.loads(data)
    assert data == (b'{"config_sha256":"' + b"0" * 64 + b'","digest":"' + doc["digest"].encode() +
                    b'","format":"aotx.grants","issued_at":"2026-01-02T03:04:05Z","principals":{"bob":'
                    b'["shared_read","shared_write"]},"version":1}\n')


def test_boot_refuses_stale_grants_and_runtime_file_without_shared(tmp_path, capsys):
    rt = tmp_path / "rt.aotxrt"
    pack_shared(rt)
    write_grants(tmp_path / "g", {"alice": ["shared_read"]}, "c" * 64,
                 now=dt.datetime.now(UTC) - dt.timedelta(hours=30))
    # the refusal comes before any connection: the URL is never used
    rc = main(["boot", "--runtime", str(rt), "--nats", "nats://127.0.0.1:1", "--service-grants", str(tmp_path / "g")])
    assert rc == 2
    assert "aotx boot: grant file" in capsys.readouterr().err
    bare = tmp_path / "bare.aotxrt"
    bare.write_text(json.dumps({"format": "aotx.runtime", "version": 1, "name": "x", "required_profiles": [],
                                "profiles": {}, "components": {}}))
    write_grants(tmp_path / "g", {"alice": ["shared_read"]}, "c" * 64)
    rc = main(["boot", "--runtime", str(bare), "--nats", "nats://127.0.0.1:1", "--service-grants", str(tmp_path / "g")])
    assert rc == 2
    assert "aotx pack --runtime" in capsys.readouterr().err
