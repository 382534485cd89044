"""SIGHUP: reload who may do what without a restart (`aotx serve`, `aotx gateway`, `aotx boot`).

* `aotx serve`: reads its gateway config again, issues fresh deployment grants from it (VAR/grants)
  and uses both: token digests added or removed, grants shrunk or grown.
* `aotx gateway`: reads its gateway config again (tokens, grants, the config digest it sends).
* `aotx boot`: reads its deployment grant file again (issue it first with `aotx grants`).

The next admission or read of every principal, each new read of an open SSE stream and the next
recall use the new grants. A config or grant file that does not load is logged and the old one
kept: a reload never stops the process.
"""
from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Callable

from quart import Quart

from api.config_reload import apply_gateway_config
from api.gateway_config import GatewayConfigError, load_gateway_config
from aotx.runtime import GrantedRuntime
from aotx.runtime_file import GrantsError, load_grants, write_grants

log = logging.getLogger("aotx.reload")


def on_sighup(reload: Callable[[], bool]) -> None:
    """Run `reload` on every SIGHUP this process gets (in the running event loop)."""
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)


def _kept(what: str, path: Path, exc: Exception) -> bool:
    log.error("%s %s not reloaded, the previous one stays in force: %s", what, path, exc,
              extra={"fields": {"event": "reload_failed", "path": str(path)}})
    return False


def _done(what: str, path: Path, sha256: str) -> bool:
    log.info("%s %s reloaded", what, path,
             extra={"fields": {"event": "reloaded", "path": str(path), "config_sha256": sha256}})
    return True


def serve_reloader(app: Quart, shared: GrantedRuntime, config_path: Path, grants_dir: Path) -> Callable[[], bool]:
    """`aotx serve`: the gateway config and the grants issued from it, both or neither."""
    def reload() -> bool:
        try:
            config = load_gateway_config(config_path)
            write_grants(grants_dir, config.actions(), config.config_sha256)
            grants = load_grants(grants_dir, config_sha256=config.config_sha256)
        except (GatewayConfigError, GrantsError, OSError) as exc:
            return _kept("gateway config", config_path, exc)
        shared.replace_grants(grants)
        apply_gateway_config(app, config)
        return _done("gateway config", config_path, config.config_sha256)
    return reload


def gateway_reloader(app: Quart, config_path: Path) -> Callable[[], bool]:
    """`aotx gateway`: its gateway config."""
    def reload() -> bool:
        try:
            config = load_gateway_config(config_path)
        except (GatewayConfigError, OSError) as exc:
            return _kept("gateway config", config_path, exc)
        apply_gateway_config(app, config)
        return _done("gateway config", config_path, config.config_sha256)
    return reload


def boot_reloader(target: GrantedRuntime, grants_dir: Path, max_age_s: float) -> Callable[[], bool]:
    """`aotx boot`: its deployment grant file (fresh, as at boot)."""
    def reload() -> bool:
        try:
            grants = load_grants(grants_dir, max_age_s=max_age_s)
        except (GrantsError, OSError) as exc:
            return _kept("deployment grants", grants_dir, exc)
        target.replace_grants(grants)
        return _done("deployment grants", grants_dir, grants.config_sha256)
    return reload
