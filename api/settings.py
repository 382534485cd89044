"""Gateway settings that the HTTP layer needs: where it binds and who may call it."""
from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field

from api.drain import DEFAULT_GRACE


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GatewaySettings:
    host: str = "127.0.0.1"
    port: int = 8080
    # sha256 hex of each accepted bearer token -> principal name
    token_digests: dict[str, str] = field(default_factory=dict)
    max_body_bytes: int = 8 * 1024 * 1024
    shutdown_grace: float = DEFAULT_GRACE   # seconds running requests may take to finish after SIGTERM (api.drain)

    @property
    def require_auth(self) -> bool:
        """Loopback accepts any API key (as the SDK examples expect); anything else needs a token."""
        return not is_loopback(self.host)

    def principal_for(self, token: str | None) -> str | None:
        if not token:
            return None
        return self.token_digests.get(token_digest(token))
