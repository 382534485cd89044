"""The shared runtime: decide → journal append → apply on ack; boot = replay through the same apply.

See runtime.py for the write path, replay.py for the one absorb path used by boot and live,
hold.py for the journal hold (429) state.
"""

from .hold import HoldStatus
from .outcome import Outcome
from .replay import BOOT_CONTROL, Projector, ReplayError
from .runtime import SharedRuntime

__all__ = ["BOOT_CONTROL", "HoldStatus", "Outcome", "Projector", "ReplayError", "SharedRuntime"]
