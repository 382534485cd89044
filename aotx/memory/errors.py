"""Memory errors. Refusals to a client are `aotx.state.Refusal` values; these exceptions are edges."""

from __future__ import annotations

from ..state.errors import StateError


class MemoryPayloadError(StateError):
    """Memory text, media rows or an embedding payload are malformed or over their byte limit (HTTP 400)."""


class MemoryApplyError(StateError):
    """A memory event does not fit the store it is applied to (fail closed; nothing changed)."""


class MemoryCodecError(StateError):
    """A memory event body or source record could not be decoded."""
