"""The deployment grant file `<dir>/grants.json`: principal → shared actions, no credentials.

    {"config_sha256": <sha256 of the gateway config's canonical JSON>, "digest": <sha256 of the
     canonical JSON of every other field>, "format": "aotx.grants", "issued_at": "<UTC, ISO 8601, Z>",
     "principals": {"alice": ["shared_manage", "shared_read", "shared_write"]}, "version": 1}

Fresh means: the digest matches (the file was not edited by hand), `issued_at` is at most
`max_age_s` old (default 24 h) and not more than 5 minutes in the future, and, where the reader
knows the gateway config's digest, `config_sha256` equals it. The runtime boots only with fresh
grants; `aotx grants` issues new ones.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .canonical import canonical_bytes, write_atomic
from .errors import GrantsError

GRANTS_FILE = "grants.json"
GRANTS_FORMAT = "aotx.grants"
GRANTS_VERSION = 1
DEFAULT_MAX_AGE_S = 24 * 3600
FUTURE_SKEW_S = 300
SHARED_ACTIONS = ("shared_manage", "shared_read", "shared_write")
_KEYS = {"format", "version", "issued_at", "config_sha256", "principals", "digest"}


@dataclass(frozen=True)
class GrantFile:
    path: Path
    issued_at: dt.datetime
    config_sha256: str
    principals: Mapping[str, frozenset[str]]
    digest: str

    def actions_of(self, principal: str) -> frozenset[str]:
        return self.principals.get(principal, frozenset())


def _utc(now: dt.datetime | None) -> dt.datetime:
    return (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)


def _stamp(t: dt.datetime) -> str:
    return t.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(doc: Mapping) -> str:
    return hashlib.sha256(canonical_bytes({k: v for k, v in doc.items() if k != "digest"})).hexdigest()


def make_grants(principals: Mapping[str, Iterable[str]], config_sha256: str,
                now: dt.datetime | None = None) -> bytes:
    """The grant file's bytes: only shared actions are kept, each list sorted."""
    doc = {"format": GRANTS_FORMAT, "version": GRANTS_VERSION, "issued_at": _stamp(_utc(now)),
           "config_sha256": config_sha256,
           "principals": {name: sorted(set(actions) & set(SHARED_ACTIONS)) for name, actions in principals.items()}}
    doc["digest"] = _digest(doc)
    return canonical_bytes(doc)


def write_grants(out_dir: str | Path, principals: Mapping[str, Iterable[str]], config_sha256: str,
                 now: dt.datetime | None = None) -> Path:
    path = Path(out_dir) / GRANTS_FILE
    write_atomic(path, make_grants(principals, config_sha256, now), mode=0o644)
    return path


def load_grants(grants_dir: str | Path, *, max_age_s: float = DEFAULT_MAX_AGE_S, now: dt.datetime | None = None,
                config_sha256: str | None = None) -> GrantFile:
    path = Path(grants_dir) / GRANTS_FILE

    def fail(why: str) -> GrantsError:
        return GrantsError(f"grant file {path}: {why}")

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise fail("does not exist; write it with `aotx grants --config GATEWAY.json --out DIR`") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != GRANTS_FORMAT or doc.get("version") != GRANTS_VERSION:
        raise fail(f"not a {GRANTS_FORMAT} version {GRANTS_VERSION} file")
    if set(doc) != _KEYS:
        raise fail(f"keys must be exactly {sorted(_KEYS)}")
    if doc["digest"] != _digest(doc):
        raise fail("digest does not match its content (edited by hand?); issue it again with `aotx grants`")
    principals = doc["principals"]
    if not isinstance(principals, dict) or not all(
            isinstance(a, list) and set(a) <= set(SHARED_ACTIONS) for a in principals.values()):
        raise fail("principals must map names to lists of shared actions")
    try:
        issued = dt.datetime.strptime(doc["issued_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except (TypeError, ValueError):
        raise fail(f"issued_at {doc['issued_at']!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    age = (_utc(now) - issued).total_seconds()
    if age > max_age_s:
        raise fail(f"stale: issued at {doc['issued_at']}, {age / 3600:.1f} h ago, older than the "
                   f"{max_age_s / 3600:g} h limit; issue fresh grants with `aotx grants`")
    if age < -FUTURE_SKEW_S:
        raise fail(f"issued at {doc['issued_at']}, {-age:.0f} s in the future; check the clock")
    if config_sha256 is not None and doc["config_sha256"] != config_sha256:
        raise fail(f"issued for gateway config {doc['config_sha256'][:12]}…, not the current "
                   f"{config_sha256[:12]}…; issue fresh grants with `aotx grants`")
    return GrantFile(path, issued, doc["config_sha256"],
                     {name: frozenset(a) for name, a in principals.items()}, doc["digest"])
