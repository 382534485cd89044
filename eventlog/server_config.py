"""The configuration file the embedded nats-server starts with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .server_auth import DEFAULT_USER, NatsUser, ensure_passwords, render_authorization, write_private


@dataclass(frozen=True)
class ClusterRoutes:
    """One node's part of a JetStream cluster: the cluster's name, this node's route port, and the
    route URLs of every node (its own included: nats-server ignores a route to itself)."""

    name: str
    port: int
    routes: tuple[str, ...]


@dataclass(frozen=True)
class ServerSettings:
    """What the embedded server needs. port=None picks a free loopback port. `users`: who may connect
    (each with the password kept under `secrets_dir`/users/, by default data_dir); by default one
    unrestricted user `aotx`. `cluster`: this node's routes when it is one node of a cluster (the
    nodes of one cluster share one secrets_dir, so the same passwords work on every node)."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int | None = None
    sync_interval: str = "always"
    max_file_store: int | None = None
    server_name: str = "aotx-embedded"
    users: tuple[NatsUser, ...] = (NatsUser(DEFAULT_USER),)
    cluster: ClusterRoutes | None = None
    shared_secrets: Path | None = None

    @property
    def secrets_dir(self) -> Path:
        return self.shared_secrets or self.data_dir

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


def render_config(settings: ServerSettings, passwords: Mapping[str, str] | None = None) -> str:
    """nats-server config text; strings are JSON-quoted, which the NATS config parser accepts.
    With `passwords` ({user: password}) the settings' users get an authorization block."""
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
    if settings.cluster is not None:
        c = settings.cluster
        lines += ["cluster {", f"  name: {q(c.name)}", f"  listen: {q(f'{settings.host}:{c.port}')}",
                  f"  routes: [{', '.join(q(r) for r in c.routes)}]", "}"]
    if passwords is not None:
        lines += render_authorization(settings.users, passwords)
    return "\n".join(lines) + "\n"


def write_config(settings: ServerSettings) -> Path:
    """The config file (0600: it holds the users' passwords), the passwords made where missing."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.ports_dir.mkdir(parents=True, exist_ok=True)
    passwords = ensure_passwords(settings.secrets_dir, settings.users)
    write_private(settings.config_path, render_config(settings, passwords))
    return settings.config_path
