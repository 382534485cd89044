"""The gateway config file: principals, their bearer-token digests and granted actions.

Format (JSON): {"principals": {"alice": {"token_sha256": "<hex>", "actions": ["shared_read", ...]}}}
Only digests are stored, never tokens.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class GatewayConfigError(ValueError):
    pass


def load_token_digests(path: str | Path) -> dict[str, str]:
    """Reads the config and answers {token digest: principal}; refuses anything malformed."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise GatewayConfigError(f"gateway config {path} does not exist") from exc
    except json.JSONDecodeError as exc:
        raise GatewayConfigError(f"gateway config {path} is not valid JSON: {exc}") from exc
    principals = doc.get("principals") if isinstance(doc, dict) else None
    if not isinstance(principals, dict) or not principals:
        raise GatewayConfigError(f"gateway config {path} names no principals")
    digests: dict[str, str] = {}
    for name, entry in principals.items():
        digest = entry.get("token_sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise GatewayConfigError(
                f"gateway config {path}: principal {name!r} needs token_sha256 (64 lowercase hex)")
        digests[digest] = name
    return digests
