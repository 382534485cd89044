"""What every app that serves our routes installs, whichever routes it carries (`aotx serve`, the lone
gateway, an app that only attaches the shared routes): native error envelopes for framework errors,
request ids, strict JSON. Idempotent."""
from __future__ import annotations

from api import request_ids
from api.errors import register_error_handlers
from api.wire_json import StrictJSONProvider


def install_common(app) -> None:
    if not isinstance(app.json, StrictJSONProvider):
        app.json = StrictJSONProvider(app)
    request_ids.install(app)
    register_error_handlers(app)
