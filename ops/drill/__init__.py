"""`aotx drill`: kill -9 the runtime and the nats-server under a scenario load and check the ledger."""
from .drill import add_arguments, kill_plan, run

__all__ = ["add_arguments", "kill_plan", "run"]
