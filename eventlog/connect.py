"""How every client of ours connects to nats-server: one connect() and one small credentials value.

NatsAuth carries nats-py's own connect() credential parameters (user/password, token, a `.creds`
file, an nkey seed file); a user:password@ or token@ in the URL works as nats-py reads it. Secrets
never show in a repr, a log line or an error message: print URLs through redact_url().
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import nats.errors

from .errors import EventLogError
from .nats_client import Client

ErrorCallback = Callable[[Exception], Awaitable[None]]
_log = logging.getLogger("eventlog")
# Every connection pings nats-server every PING_INTERVAL seconds and leaves a server that answered none
# of MAX_OUTSTANDING_PINGS + 1 pings (~8 s) for another (nats-py's default: every 2 minutes, so a
# connection on a SIGSTOPped or partitioned node stayed there for minutes while every write timed out).
# A caller may pass its own (the lease connection pings every second).
PING_INTERVAL = 2.0
MAX_OUTSTANDING_PINGS = 3
_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^@/,\s]*@", re.IGNORECASE)


class NatsAuthorizationError(EventLogError):
    """nats-server refused this client: no credentials, wrong ones, or a user it does not know."""


@dataclass(frozen=True)
class NatsAuth:
    """Credentials for nats-server, named as nats-py's connect() names them (all optional)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    user_credentials: str | None = None   # path of a `.creds` file (user JWT + nkey seed)
    nkeys_seed: str | None = None         # path of an nkey seed file

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments of nats.connect() for these credentials."""
        names = ("user", "password", "token", "user_credentials", "nkeys_seed")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def __str__(self) -> str:
        """What kind of credentials these are, never a secret."""
        said = [f"user {self.user}" + (" and a password" if self.password else "")] if self.user else []
        said += ["a token"] if self.token else []
        said += [f"the credentials file {self.user_credentials}"] if self.user_credentials else []
        said += [f"the nkey seed file {self.nkeys_seed}"] if self.nkeys_seed else []
        return ", ".join(said) or "no credentials"


def redact_url(url: str) -> str:
    """The URL (or comma-separated URLs) with any user:password@ / token@ part replaced by ***@."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}***@", url)


def seed_urls(url: str) -> list[str]:
    """The servers of a `--nats` value: one URL, or several separated by commas (a cluster's seeds)."""
    servers = [u.strip() for u in url.split(",") if u.strip()]
    if not servers:
        raise ValueError("no NATS URL given")
    return servers


def _refused(exc: Exception) -> bool:
    return isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in str(exc).lower()


async def connect(url: str, auth: NatsAuth | None = None, *, name: str,
                  error_cb: ErrorCallback | None = None, **options: Any) -> Client:
    """nats.connect(url) with `auth`, our client `name` and nats-py `options` (reconnects and so on).
    `url` may name several servers separated by commas: the client connects to one and reconnects
    across all of them (and the servers the cluster announces).

    The connection pings every PING_INTERVAL seconds unless `options` say otherwise (see above).
    A refusal while connecting raises NatsAuthorizationError at once (nats-py alone would retry
    forever with max_reconnect_attempts=-1); later errors go to `error_cb`.
    """
    connecting = True

    async def on_error(exc: Exception) -> None:
        if connecting and _refused(exc):
            given = (f"with {auth}" if auth else "with the credentials in the URL" if redact_url(url) != url
                     else "without credentials")
            raise NatsAuthorizationError(f"nats-server at {redact_url(url)} refused the connection of {name} "
                                         f"({given}): authorization violation")
        if error_cb is not None:
            await error_cb(exc)

    servers = seed_urls(url)
    options.setdefault("ping_interval", PING_INTERVAL)
    options.setdefault("max_outstanding_pings", MAX_OUTSTANDING_PINGS)
    nc = Client()
    try:
        await nc.connect(servers if len(servers) > 1 else servers[0], name=name, error_cb=on_error,
                         **(auth.connect_options() if auth else {}), **options)
    except NatsAuthorizationError:
        await _close_quietly(nc)
        raise
    connecting = False
    return nc


async def _close_quietly(nc: Client) -> None:
    try:
        await nc.close()
    except (nats.errors.Error, OSError) as exc:  # a half-open connection after a refusal: it is gone either way
        _log.debug("closing a refused nats connection: %s", type(exc).__name__)


async def flush_subscriptions(nc: Client) -> None:
    """Return once nats-server has every command `nc` was given so far (the SUBs of a service that
    then says it is up). nats-py's flush() writes its PING straight to the socket, ahead of what still
    waits for its flusher task (a SUB just made): its PONG can come back before the server has the
    subscription, and a request from another connection then meets `no responders`. The flusher,
    woken before that PING, has written those commands by the time the PONG is read, so a second
    PING follows them and its PONG proves they arrived."""
    await nc.flush()
    await nc.flush()
