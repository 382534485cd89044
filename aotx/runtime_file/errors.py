"""Refusals of the runtime file and grant file readers; each message names the file and the cause."""

from __future__ import annotations


class RuntimeFileError(ValueError):
    """The runtime file is missing, malformed, or needs something this reader does not know."""


class GrantsError(ValueError):
    """The deployment grant file is missing, malformed, altered, stale or for another config."""
