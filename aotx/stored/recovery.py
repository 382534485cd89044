"""What a boot closes (pure): a response created but not finished, and an idempotency key whose first
attempt did not finish, were cut by the restart. This runtime never runs them again: the response is
journalled `failed` with an error saying so, the key `interrupted` (KeyEnd.INTERRUPTED, status 503),
so a repeat with that key is told the truth and a key never yields two different answers."""

from __future__ import annotations

from .commands import FinishKey, FinishResponse, StoredCommand
from .limits import StoredLimits
from .state import StoredState
from .vocab import KeyEnd, ResponseStatus

INTERRUPTED_ERROR = {"code": "server_error",
                     "message": "The response was interrupted by a restart of the server; it is not run again."}
INTERRUPTED_STATUS = 503


def interruptions(state: StoredState) -> list[tuple[str, StoredCommand]]:
    """(identity, command) for every unfinished response and key, identities and records in order."""
    out: list[tuple[str, StoredCommand]] = []
    for identity in sorted(state.books):
        book = state.books[identity]
        out += [(identity, FinishResponse(rid, ResponseStatus.FAILED, error=INTERRUPTED_ERROR))
                for rid, r in book.responses.items() if r.finished is None]
        out += [(identity, FinishKey(surface, key, INTERRUPTED_STATUS, {}, KeyEnd.INTERRUPTED))
                for (surface, key), k in book.keys.items() if k.finished is None]
    return out


def expirable(state: StoredState, now: int, limits: StoredLimits) -> list[str]:
    """Identities holding a finished response or key past its retention (the sweep records Expire for each)."""
    return [identity for identity in sorted(state.books)
            if any(r.finished is not None and limits.response_expired(r.created.created_at, now)
                   for r in state.books[identity].responses.values())
            or any(k.finished is not None and limits.key_expired(k.started.started_at, now)
                   for k in state.books[identity].keys.values())]
