"""Stored-state errors: malformed input to the core, an undecodable body, an event that contradicts the state.

Refusals to a client are values (aotx.stored.outcomes.StoredRefusal), not exceptions. StoredError
subclasses aotx.state.StateError, so a replay turns it into a ReplayError (fail closed).
"""

from __future__ import annotations

from ..state.errors import StateError


class StoredError(StateError):
    """Base of every stored-state error."""


class StoredCodecError(StoredError):
    """A stored event body could not be decoded (unknown kind or version, missing, extra or bad field)."""


class StoredApplyError(StoredError):
    """A stored event does not fit the state it is applied to: nothing of it was applied."""
