"""The configuration file the embedded nats-server starts with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerSettings:
    """What the embedded server needs. port=None picks a free loopback port."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int | None = None
    sync_interval: str = "always"
    max_file_store: int | None = None
    server_name: str = "aotx-embedded"

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "jetstream"

    @property
    def ports_dir(self) -> Path:
        return self.data_dir / "ports"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "nats-server.conf"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "nats-server.log"


def render_config(settings: ServerSettings) -> str:
    """nats-server config text; strings are JSON-quoted, which the NATS config parser accepts."""
    port = -1 if settings.port is None else settings.port
    q = json.dumps
    lines = [
        f"server_name: {q(settings.server_name)}",
        f"listen: {q(f'{settings.host}:{port}')}",
        f"ports_file_dir: {q(str(settings.ports_dir))}",
        "jetstream {",
        f"  store_dir: {q(str(settings.store_dir))}",
        f"  sync_interval: {settings.sync_interval}",
    ]
    if settings.max_file_store is not None:
        lines.append(f"  max_file_store: {int(settings.max_file_store)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_config(settings: ServerSettings) -> Path:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.ports_dir.mkdir(parents=True, exist_ok=True)
    settings.config_path.write_text(render_config(settings))
    return settings.config_path
