"""What every app that serves our routes installs, whichever routes it carries (`aotx serve`, the lone
gateway, an app that only attaches the shared routes): native error envelopes for framework errors,
request ids, strict JSON. Idempotent."""
from __future__ import annotations

from api import request_ids
from api.errors import register_error_handlers
from api.lazy_rules import LazyRule
from api.wire_json import StrictJSONProvider


def install_common(app) -> None:
    app.url_rule_class = LazyRule     # rules added from here on compile their URL builders on first use
    if not isinstance(app.json, StrictJSONProvider):
        app.json = StrictJSONProvider(app)
    request_ids.install(app)
    register_error_handlers(app)
