"""Bearer-token check of the model surfaces, applied before every route when the gateway is not on loopback."""
from __future__ import annotations

from quart import current_app, request

from api.settings import GatewaySettings

OPEN_PATHS = frozenset({"/health"})
# /aotx/v1/shared checks its own tokens and grants (always, loopback or not): see api/shared.
SHARED_PREFIX = "/aotx/v1/shared"


def presented_token() -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def authenticated() -> bool:
    settings: GatewaySettings = current_app.config["AOTX_SETTINGS"]
    if request.path == SHARED_PREFIX or request.path.startswith(SHARED_PREFIX + "/"):
        return True
    if not settings.require_auth or request.path in OPEN_PATHS:
        return True
    return settings.principal_for(presented_token()) is not None
