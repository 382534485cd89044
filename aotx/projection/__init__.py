"""aotx.projection: the Projector, the one path by which journal messages change the shared state.

Boot replay and live writes (aotx.runtime) and snapshots (aotx.snapshot) all build on it; it imports
neither of them (an import-linter contract: runtime → snapshot → projection).
"""

from .projector import BOOT_CONTROL, TICK_KIND, Projector, ReplayError, boot_control_body, chain

__all__ = ["BOOT_CONTROL", "Projector", "ReplayError", "TICK_KIND", "boot_control_body", "chain"]
