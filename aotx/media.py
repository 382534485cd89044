"""The media store as the surfaces reach it: api imports this, never eventlog (DESIGN §3).

`open_media` attaches a MediaStore on a connection of its own that reconnects forever (a lone gateway
outlives nats-server restarts; an outage is logged once, not once per attempt); `close_media` closes that
connection within its bound, never raising for a server that is gone.
"""
from __future__ import annotations

import logging

from nats.aio.client import Client

from aotx.log_setup import set_up
from eventlog import MEDIA_BUCKET, MediaStore, NatsAuth, OutageLog, close_connection, connect

__all__ = ["MEDIA_BUCKET", "MediaStore", "NatsAuth", "close_media", "open_media"]

log = logging.getLogger("aotx.shared.media")
_NAME = "aotx-media"


async def open_media(url: str, bucket: str = MEDIA_BUCKET, auth: NatsAuth | None = None) -> tuple[MediaStore, Client]:
    """The media store in `bucket` at `url` (created if missing), and the connection it owns."""
    outage = OutageLog(log, _NAME, url)
    nc = await connect(url, auth, name=_NAME, error_cb=outage.error, reconnected_cb=outage.reconnected,
                       max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        return await set_up(f"the media store {bucket}", lambda: MediaStore.attach(nc, bucket)), nc
    except BaseException:   # not attached (refused, cancelled): the connection goes, the error stays
        await close_connection(nc, name=_NAME)
        raise


async def close_media(nc: Client | None) -> None:
    """Close the connection `open_media` answered (None: nothing was opened)."""
    await close_connection(nc, name=_NAME)
