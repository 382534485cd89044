"""Enumerations of the stored state: response status, how a keyed answer ended, why something is refused."""

from __future__ import annotations

import enum


class ResponseStatus(enum.IntEnum):
    """A stored response's status (OpenAI's words, `.wire`)."""

    QUEUED = 1         # created with background: true, no event yet
    IN_PROGRESS = 2    # created in the foreground, or a background one with events
    COMPLETED = 3
    INCOMPLETE = 4
    FAILED = 5
    CANCELLED = 6

    @property
    def terminal(self) -> bool:
        return self >= ResponseStatus.COMPLETED

    @property
    def wire(self) -> str:
        return self.name.lower()


class KeyEnd(enum.IntEnum):
    """How the first attempt of an idempotency key ended."""

    COMPLETE = 1       # its whole answer is saved: a repeat replays it
    INTERRUPTED = 2    # cut by a restart (journalled at boot): a repeat is told so, never run again
    RELEASED = 3       # refused before it ran (a 4xx/5xx raised before any answer): nothing saved, the key
                       # reads as absent again and the next request with it runs (Stripe saves no result of a
                       # request that did not begin executing)


class KeyState(enum.Enum):
    """What an idempotency key lookup found."""

    ABSENT = "absent"        # no record (or expired): the request runs
    STARTED = "started"      # BeginKey recorded it now: the caller runs the request
    RUNNING = "running"      # the first attempt still runs: follow it
    FINISHED = "finished"    # the saved answer (or the honest interruption) is there
    MISMATCH = "mismatch"    # the key was used with another body


class Reason(enum.Enum):
    """Why a stored write or read is refused; `.status` is the HTTP status the surfaces answer with."""

    UNKNOWN = (404, "unknown")          # no such id for this identity (another identity's, deleted, expired)
    INVALID = (400, "invalid")          # a malformed command (bad id, not JSON, conversation + previous id)
    BAD_CURSOR = (400, "bad_cursor")    # `after` is not an item of the list, or limit / order out of range
    EXISTS = (409, "exists")            # the id is taken
    FINISHED = (409, "finished")        # the response or key is finished: no more events, no cancellation
    PENDING = (409, "pending")          # previous_response_id names a response that has not finished
    OUT_OF_ORDER = (409, "out_of_order")  # events or chunks not continuing at the saved count
    MISMATCH = (422, "mismatch")        # the idempotency key was used with another request body
    TOO_LARGE = (413, "too_large")      # one command over the command byte limit
    FULL = (507, "full")                # a stored table or the byte budget is full
    HOLD = (429, "hold")                # the journal is on hold: nothing was stored
    UNAVAILABLE = (503, "unavailable")  # the runtime stopped, or another writer took the lineage

    def __init__(self, status: int, word: str) -> None:
        self.status, self.word = status, word
