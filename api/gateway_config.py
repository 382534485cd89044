"""The gateway config file: principals, their bearer-token digests and granted actions.

One format for the model surfaces' bearer check and the shared grants:

    {"principals": {"alice": {"token_sha256": "<64 lowercase hex>",
                              "actions": ["shared_manage", "shared_read", "shared_write"]}}}

Only digests are stored, never tokens. `config_sha256` (the sha256 of the file's canonical JSON)
ties a deployment grant file to the config it was issued from.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from aotx.runtime_file import canonical_bytes

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
SHARED_ACTIONS = ("shared_manage", "shared_read", "shared_write")
DEV_PRINCIPALS = ("alice", "bob")


class GatewayConfigError(ValueError):
    pass


@dataclass(frozen=True)
class PrincipalEntry:
    name: str
    token_sha256: str
    actions: frozenset[str]


@dataclass(frozen=True)
class GatewayConfig:
    path: Path
    principals: Mapping[str, PrincipalEntry]
    config_sha256: str

    def token_digests(self) -> dict[str, str]:
        """{token digest: principal}, for the model surfaces' bearer check."""
        return {p.token_sha256: p.name for p in self.principals.values()}

    def shared_principals(self) -> dict[str, tuple[str, set[str]]]:
        """{token digest: (principal, shared actions)}, for attach_shared."""
        return {p.token_sha256: (p.name, set(p.actions) & set(SHARED_ACTIONS)) for p in self.principals.values()}

    def actions(self) -> dict[str, list[str]]:
        """{principal: sorted shared actions}: what a deployment grant file holds."""
        return {p.name: sorted(set(p.actions) & set(SHARED_ACTIONS)) for p in self.principals.values()}


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Reads and checks the config; refuses anything malformed with the file's name and the cause."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise GatewayConfigError(f"gateway config {path} does not exist") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GatewayConfigError(f"gateway config {path} is not valid JSON: {exc}") from exc
    principals = doc.get("principals") if isinstance(doc, dict) else None
    if not isinstance(principals, dict) or not principals:
        raise GatewayConfigError(f"gateway config {path} names no principals")
    entries: dict[str, PrincipalEntry] = {}
    seen: set[str] = set()
    for name, entry in principals.items():
        digest = entry.get("token_sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise GatewayConfigError(
                f"gateway config {path}: principal {name!r} needs token_sha256 (64 lowercase hex)")
        if digest in seen:
            raise GatewayConfigError(f"gateway config {path}: principal {name!r} shares a token with another")
        seen.add(digest)
        actions = entry.get("actions", [])
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise GatewayConfigError(f"gateway config {path}: principal {name!r}: actions must be a list of strings")
        entries[name] = PrincipalEntry(name, digest, frozenset(actions))
    return GatewayConfig(path, entries, hashlib.sha256(canonical_bytes(doc)).hexdigest())


def load_token_digests(path: str | Path) -> dict[str, str]:
    """Reads the config and answers {token digest: principal}; refuses anything malformed."""
    return load_gateway_config(path).token_digests()


def add_dev_principal(config: Path, tokens: Path, name: str) -> None:
    """A development principal holding every shared action in the config at `config` (created when
    missing), its bearer token in `tokens/<name>` (mode 0600). A principal already there with its
    token file is left as it is."""
    doc: dict = json.loads(config.read_text(encoding="utf-8")) if config.exists() else {"principals": {}}
    if name in doc["principals"] and (tokens / name).exists():
        return
    token = f"aotx-dev-{name}-{secrets.token_urlsafe(32)}"
    path = tokens / name
    if path.exists():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    doc["principals"][name] = {"token_sha256": hashlib.sha256(token.encode()).hexdigest(),
                               "actions": list(SHARED_ACTIONS)}
    tmp = config.with_name(".gateway.json.tmp")
    tmp.write_bytes(json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n")
    os.replace(tmp, config)


def ensure_dev_config(var_dir: str | Path) -> tuple[Path, Path, bool]:
    """First start: write `<var>/gateway.json` with alice and bob holding every shared action and
    their bearer tokens in `<var>/tokens/<name>` (mode 0600). Later starts reuse both.
    Answers (config path, tokens dir, created now)."""
    var = Path(var_dir)
    config, tokens = var / "gateway.json", var / "tokens"
    if config.exists():
        return config, tokens, False
    tokens.mkdir(parents=True, exist_ok=True)
    os.chmod(tokens, 0o700)
    for name in DEV_PRINCIPALS:
        add_dev_principal(config, tokens, name)
    return config, tokens, True
