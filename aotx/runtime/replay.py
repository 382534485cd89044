"""The projector, where the runtime's callers have always imported it: it lives in aotx.projection
(outside the runtime, so aotx.snapshot can build on it without importing the runtime)."""

from ..projection.projector import BOOT_CONTROL, TICK_KIND, Projector, ReplayError, boot_control_body, chain

__all__ = ["BOOT_CONTROL", "Projector", "ReplayError", "TICK_KIND", "boot_control_body", "chain"]
