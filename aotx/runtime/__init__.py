"""The shared runtime: decide → journal append → apply on ack; boot = replay through the same apply.

See runtime.py for the write path, replay.py for the one absorb path used by boot and live,
hold.py for the journal hold (429) state.
"""

from .hold import HoldStatus
from .outcome import Outcome
from .replay import BOOT_CONTROL, Projector, ReplayError
from .granted import GrantedRuntime, grants_of
from .rpc import RemoteRuntime, RuntimeRpcServer, changed_subject, rpc_subject
from .runtime import SharedRuntime
from .views import VIEWS

__all__ = ["BOOT_CONTROL", "GrantedRuntime", "HoldStatus", "Outcome", "Projector", "RemoteRuntime", "ReplayError",
           "RuntimeRpcServer", "SharedRuntime", "VIEWS", "changed_subject", "grants_of", "rpc_subject"]
