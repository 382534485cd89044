"""Apply a reloaded gateway config to a running app (SIGHUP; ops/reload.py reads and checks it).

What changes at once: the bearer-token digests of the model surfaces, the shared routes' principals
with their grants (the next request, and each new read of an open SSE stream, use them: a token
removed ends its streams, a grant removed refuses the next read), and the config digest a lone
gateway sends to its runtime. Bind address and port stay as they were.
"""
from __future__ import annotations

import dataclasses

from quart import Quart

from aotx.runtime import RemoteRuntime

from .gateway_config import GatewayConfig
from .shared import replace_principals
from .shared.routes import _EXT


def apply_gateway_config(app: Quart, config: GatewayConfig) -> None:
    principals = config.shared_principals()
    if _EXT in app.extensions:
        replace_principals(app, principals)   # checks every digest before anything changes
        runtime = app.extensions[_EXT]["runtime"]
        # a gateway's RemoteRuntime, or the one `aotx serve --leases` forwards through (RoutedRuntime.remote)
        remote = runtime if isinstance(runtime, RemoteRuntime) else getattr(runtime, "remote", None)
        if isinstance(remote, RemoteRuntime):
            remote.config_sha256 = config.config_sha256
    settings = app.config["AOTX_SETTINGS"]
    app.config["AOTX_SETTINGS"] = dataclasses.replace(settings, token_digests=config.token_digests())
