"""Bearer tokens → principals with their current shared grants. Only token digests are kept."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from aotx.state import Actor, Grants

from ..auth import bearer_token
from ..errors import ApiError
from ..gateway_config import load_gateway_config

SHARED_ACTIONS = ("shared_read", "shared_write", "shared_manage")
_HEX64 = re.compile(r"[0-9a-f]{64}")


# what a shared request without a known token, or before the runtime booted, is answered
UNAUTHORIZED = ApiError(401, "a valid bearer token is required", type="unauthorized")
UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}
BOOTING = ApiError(503, "the shared runtime is still booting", type="unavailable")


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    name: str
    grants: Grants

    @property
    def actor(self) -> Actor:
        return Actor(self.name, self.grants)


def authenticate(principals: Mapping[str, "Principal"], authorization: str | None) -> tuple["Principal", str] | None:
    """The principal of an Authorization header value and its token's digest (hashed once a request);
    None without a known bearer token. Every shared request is authenticated by this (the blueprint
    and the fast path, api.shared.fast)."""
    token = bearer_token(authorization)
    digest = token_sha256(token) if token else None
    principal = principals.get(digest) if digest else None
    return None if principal is None else (principal, digest)


def grants_of(actions: Iterable[str]) -> Grants:
    got = set(actions)
    return Grants(shared_read="shared_read" in got, shared_write="shared_write" in got,
                  shared_manage="shared_manage" in got)


def normalise(principals: Mapping[str, tuple[str, Iterable[str]]]) -> dict[str, Principal]:
    """{token_sha256: (name, actions)} → {token_sha256: Principal}; refuses malformed digests."""
    out: dict[str, Principal] = {}
    for digest, (name, actions) in principals.items():
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise ValueError(f"principal {name!r}: token digest must be 64 lowercase hex digits")
        if not isinstance(name, str) or not name:
            raise ValueError("principal names must be nonempty strings")
        out[digest] = Principal(name, grants_of(actions))
    return out


def principals_from_gateway_config(path: str | Path) -> dict[str, tuple[str, set[str]]]:
    """Read the gateway config (api.gateway_config, one format for every surface) into
    attach_shared's mapping {token digest: (principal, shared actions)}."""
    return load_gateway_config(path).shared_principals()
