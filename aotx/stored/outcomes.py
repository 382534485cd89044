"""What the stored core answers: Saved (the events were journalled and applied), a KeyLookup, or a
StoredRefusal (nothing changed) that the surfaces map to their own error envelope (`reason.status`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from .vocab import KeyEnd, KeyState, Reason


@dataclass(frozen=True)
class StoredRefusal:
    reason: Reason
    message: str
    param: Optional[str] = None       # the request field it is about, where there is one

    @property
    def status(self) -> int:
        return self.reason.status


@dataclass(frozen=True)
class KeyLookup:
    """An idempotency key's state for one request body. `chunks`: the saved answer so far (a stream's
    events, or the buffered JSON as one or more chunks); `bound`: the stored response that is the answer
    ("" none); for FINISHED also `end`, the HTTP `status` and `headers` (a JSON object's bytes)."""

    state: KeyState
    bound: str = ""
    chunks: tuple[bytes, ...] = ()
    end: Optional[KeyEnd] = None
    status: Optional[int] = None
    headers: bytes = b"{}"
    started_at: int = 0


@dataclass(frozen=True)
class Saved:
    """The command's events are in the journal and applied (`events`: how many; 0 when nothing was
    needed); `key`: for BeginKey, the key's state (STARTED: the caller runs the request)."""

    events: int = 0
    key: Optional[KeyLookup] = None


StoredOutcome = Union[Saved, StoredRefusal]


def refuse(reason: Reason, message: str, param: Optional[str] = None) -> StoredRefusal:
    return StoredRefusal(reason, message, param)
