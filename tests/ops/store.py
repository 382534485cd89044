"""Read an `aotx serve` state directory's embedded JetStream store from a test (while it runs)."""
from __future__ import annotations

import json
from pathlib import Path

from eventlog import connect, stored_auth


def embedded_url(var: Path) -> str:
    ports = sorted((var / "nats" / "ports").glob("*.ports"))
    assert len(ports) == 1, ports
    return json.loads(ports[0].read_text())["nats"][0]


async def journal_state(var: Path, stream: str) -> tuple[int, int, int]:
    """(last seq, messages, bytes) of the journal stream of the nats-server running on var/nats, read with
    the credentials `aotx serve` generated there."""
    nc = await connect(embedded_url(var), stored_auth(var / "nats"), name="test-store", allow_reconnect=False)
    try:
        info = await nc.jetstream().stream_info(stream)
        return info.state.last_seq, info.state.messages, info.state.bytes
    finally:
        await nc.close()
