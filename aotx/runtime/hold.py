"""The journal hold: while it is on, new mutations answer 429 and change nothing; reads go on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class HoldStatus:
    """Live save status of the journal (not part of any receipt).

    reason: None (no hold), "full" (byte cap, discard=new) or "unavailable" (server or disk error).
    unsynced: a write whose outcome is unknown (no ack, or only some ticks acked); the runtime
    reads the log back before it takes the next mutation.
    """

    reason: Optional[str] = None
    last_error: Optional[str] = None
    pending_bytes: int = 0
    unsynced: bool = False
    holds: int = 0          # how many times a hold began since boot

    @property
    def active(self) -> bool:
        return self.reason is not None

    def begin(self, reason: str, error: str, pending_bytes: int = 0, unsynced: bool = False) -> None:
        if self.reason is None:
            self.holds += 1
        self.reason, self.last_error = reason, error
        self.pending_bytes, self.unsynced = pending_bytes, unsynced

    def lift(self) -> None:
        self.reason, self.pending_bytes, self.unsynced = None, 0, False

    def json(self) -> dict[str, Any]:
        return {"hold": self.active, "reason": self.reason, "pending_bytes": self.pending_bytes,
                "last_disk_error": self.last_error, "unsynced": self.unsynced}


async def has_room(connection: Any, hold: HoldStatus, need: int) -> bool:
    """Probe while on hold: does the stream answer (else its error is noted and the hold stays), and
    has it room for `need` more bytes?"""
    try:
        info = await (await connection.ensure()).stream_info()
    except Exception as exc:  # any failure to answer keeps the hold
        hold.last_error = f"stream_info: {type(exc).__name__}: {exc}"
        return False
    return info.max_bytes is None or info.bytes + need <= info.max_bytes
