"""The shared runtime: decide → journal append → apply on ack; boot = replay through the same apply.

runtime.py is the facade (its docstring maps the parts: planner, writer, group commit, boot,
executor, snapshots); the projector (aotx.projection, re-exported by replay.py) is the one absorb
path used by boot and live; port.py what a gateway needs from a runtime (RuntimePort), declared by
SharedRuntime, GrantedRuntime and RemoteRuntime.
"""

from .broker import Broker, Subscription
from .hold import HoldStatus
from .outcome import Outcome
from .port import RuntimePort, parse_submission, submit_body
from ..projection import BOOT_CONTROL, Projector, ReplayError
from .granted import GrantedRuntime, grants_of
from .rpc import RemoteRuntime, RuntimeRpcServer, changed_subject, rpc_subject
from .stored_remote import RemoteStored
from .runtime import SharedRuntime
from .targets import ChangeFeed, Targets
from .views import VIEWS

__all__ = ["BOOT_CONTROL", "Broker", "ChangeFeed", "GrantedRuntime", "HoldStatus", "Outcome", "Projector", "RemoteRuntime", "RemoteStored", "ReplayError",
           "RuntimePort", "RuntimeRpcServer", "SharedRuntime", "Subscription", "Targets", "VIEWS", "changed_subject", "grants_of",
           "parse_submission", "rpc_subject", "submit_body"]
