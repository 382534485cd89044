"""Bearer-token check of the model surfaces, applied before every route when the gateway is not on loopback."""
from __future__ import annotations

from quart import current_app, request

from api.settings import GatewaySettings

OPEN_PATHS = frozenset({"/health"})
# the web page (api.web_routes): static files that hold no data; what they show, they fetch with a token
PAGE_PATHS = frozenset({"/", "/stats"})
PAGE_PREFIX = "/static/"
PAGE_BLUEPRINT = "web"   # api.web_routes' blueprint: only its routes are open
# /aotx/v1/shared checks its own tokens and grants (always, loopback or not): see api/shared.
SHARED_PREFIX = "/aotx/v1/shared"


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value; None for anything else."""
    if not header or header[:7].lower() != "bearer ":
        return None
    return header[7:].strip() or None


def presented_token() -> str | None:
    """The model surfaces' token: a Bearer Authorization header, else x-api-key (the shared routes
    take the Bearer header only)."""
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return bearer_token(auth)
    return request.headers.get("x-api-key") or None


def authenticated() -> bool:
    settings: GatewaySettings = current_app.config["AOTX_SETTINGS"]
    if request.path == SHARED_PREFIX or request.path.startswith(SHARED_PREFIX + "/"):
        return True
    if not settings.require_auth or request.path in OPEN_PATHS:
        return True
    if request.blueprint == PAGE_BLUEPRINT and (request.path in PAGE_PATHS or request.path.startswith(PAGE_PREFIX)):
        return True   # the page's own routes (as the router matched them), never another route under /static/
    return settings.principal_for(presented_token()) is not None
