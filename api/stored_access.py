"""How the standard surfaces reach the stored state (aotx.stored) and who owns what they store.

`attach_stored(app, port)` ties a StoredJournal (in `aotx serve`: the shared runtime's `stored`; on
`aotx gateway --model-surfaces`: aotx.runtime.RemoteStored, each call to the caller's owner) to the app; `stored_port()` answers it inside a request, or None where the app has none (a bare
`create_app(service)`, as the engine-only tests build). `caller_identity()` is the identity that owns
what the request stores or reads: the principal's name where bearer tokens are required, else (on
loopback, where any API key is accepted) `key:` + sha256 of the key presented (an absent key is the
empty key) — the key itself is never stored.
"""
from __future__ import annotations

from typing import Optional

from quart import Quart, current_app

from aotx.runtime.stored_writes import StoredWrites
from aotx.stored import ids
from aotx.stored.port import StoredJournal
from api.auth import presented_token
from api.settings import GatewaySettings

EXT = "aotx.stored"


def attach_stored(app: Quart, port: StoredJournal | StoredWrites) -> None:
    """`port`: a StoredJournal (a gateway's RemoteStored), or the runtime's own StoredWrites (its journal)."""
    app.extensions[EXT] = port.journal if isinstance(port, StoredWrites) else port


def stored_port() -> Optional[StoredJournal]:
    return current_app.extensions.get(EXT)


def caller_identity() -> str:
    settings: GatewaySettings = current_app.config["AOTX_SETTINGS"]
    token = presented_token()
    if settings.require_auth:
        principal = settings.principal_for(token)
        if principal is None:   # api.app's before_request refuses this earlier; never reached there
            raise PermissionError("no principal for the presented token")
        return ids.identity_of_principal(principal)
    return ids.identity_of_key(token or "")
