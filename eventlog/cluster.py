"""A JetStream cluster of embedded nats-servers on loopback: `aotx cluster`, tests and drills.

`EmbeddedCluster(dir, size=3)` starts `size` nodes, each an EmbeddedNats with its own data
directory (`dir/n1`, `dir/n2`, …), its own client port and route port, routes to every other node,
`sync_interval: always`, and the same users and passwords on every node (kept once, under
`dir/users/`). `start()` returns once every node answers and the cluster's JetStream has a meta
leader (a stream can be created). `urls` is the comma-separated seed list every `--nats` accepts.

Ports are chosen once (free loopback ports unless given) and kept across kill()/restart() of a
node, so routes and clients find a restarted node where it was.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Sequence

import nats.errors
import nats.js.errors
from nats.js.api import StorageType, StreamConfig

from .connect import NatsAuth, connect
from .server import EmbeddedNats, NatsServerError
from .server_auth import NatsUser, stored_auth
from .server_config import ClusterRoutes

CLUSTER_NAME = "aotx"
PROBE_STREAM = "AOTX_CLUSTER_PROBE"   # created and deleted by wait_jetstream


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct free TCP ports on `host` (bound at once, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class EmbeddedCluster:
    def __init__(self, data_dir: str | Path, *, size: int = 3, host: str = "127.0.0.1",
                 client_ports: Sequence[int] | None = None, cluster_ports: Sequence[int] | None = None,
                 sync_interval: str = "always", users: Sequence[NatsUser] | None = None,
                 start_timeout: float = 30.0) -> None:
        if size < 1:
            raise ValueError("a cluster has at least one node")
        self.data_dir = Path(data_dir).resolve()
        self.host, self.start_timeout = host, start_timeout
        ports = free_ports(2 * size, host) if client_ports is None or cluster_ports is None else []
        clients = list(client_ports) if client_ports is not None else ports[:size]
        routes_at = list(cluster_ports) if cluster_ports is not None else ports[size:]
        if len(clients) != size or len(routes_at) != size:
            raise ValueError(f"a cluster of {size} needs {size} client ports and {size} cluster ports")
        routes = tuple(f"nats-route://{host}:{p}" for p in routes_at)
        self.nodes = [
            EmbeddedNats(self.data_dir / f"n{i + 1}", port=clients[i], host=host, sync_interval=sync_interval,
                         users=users, server_name=f"aotx-n{i + 1}", shared_secrets=self.data_dir,
                         cluster=ClusterRoutes(CLUSTER_NAME, routes_at[i],
                                               tuple(r for j, r in enumerate(routes) if j != i)),
                         start_timeout=start_timeout)
            for i in range(size)]
        self.client_ports = clients

    # -- addresses -----------------------------------------------------------------------------
    @property
    def urls(self) -> str:
        """Every node's client URL, comma-separated (the seed list of `--nats`)."""
        return ",".join(f"nats://{self.host}:{p}" for p in self.client_ports)

    def auth(self, user: str | None = None) -> NatsAuth:
        return stored_auth(self.data_dir, user or self.nodes[0].settings.users[0].name)

    def password_file(self, user: str | None = None) -> Path:
        return self.nodes[0].password_file(user)

    def client_url(self, user: str | None = None) -> str:
        """The seed list with `user`'s credentials in every URL (never print it)."""
        a = self.auth(user)
        return ",".join(f"nats://{a.user}:{a.password}@{self.host}:{p}" for p in self.client_ports)

    # -- life ----------------------------------------------------------------------------------
    def start(self) -> "EmbeddedCluster":
        """Start every node (they find each other through their routes), then wait for JetStream."""
        for node in self.nodes:
            node._spawn()
        deadline = time.monotonic() + self.start_timeout
        try:
            for node in self.nodes:
                while not node._poll_ready():
                    if time.monotonic() > deadline:
                        raise node._start_failed()
                    time.sleep(0.02)
            asyncio.run(self.wait_jetstream(max(1.0, deadline - time.monotonic())))
        except BaseException:
            self.stop()
            raise
        return self

    async def start_async(self) -> "EmbeddedCluster":
        await asyncio.to_thread(self._start_nodes)
        try:
            await self.wait_jetstream(self.start_timeout)
        except BaseException:
            await asyncio.to_thread(self.stop)
            raise
        return self

    def _start_nodes(self) -> None:
        for node in self.nodes:
            node._spawn()
        deadline = time.monotonic() + self.start_timeout
        for node in self.nodes:
            while not node._poll_ready():
                if time.monotonic() > deadline:
                    raise node._start_failed()
                time.sleep(0.02)

    async def wait_jetstream(self, timeout: float) -> None:
        """Until the cluster's JetStream can place a stream on every node: a probe stream with one
        replica per node is created (then deleted), which needs a meta leader and every peer online."""
        nc = await connect(self.urls, self.auth(), name="aotx-cluster-ready", max_reconnect_attempts=-1,
                           reconnect_time_wait=0.1)
        probe = StreamConfig(name=PROBE_STREAM, subjects=[f"{PROBE_STREAM}.probe"], storage=StorageType.MEMORY,
                             num_replicas=len(self.nodes))
        try:
            js = nc.jetstream(timeout=2.0)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    await js.add_stream(probe)
                    await js.delete_stream(PROBE_STREAM)
                    return
                except (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError) as exc:
                    if time.monotonic() > deadline:
                        raise NatsServerError(f"the cluster's JetStream was not ready on all {len(self.nodes)} "
                                              f"nodes within {timeout:.0f}s: {type(exc).__name__}: {exc}") from None
                    await asyncio.sleep(0.1)
        finally:
            await nc.close()

    def restart(self, index: int) -> None:
        """Start node `index` again (same store, same ports) and wait until it serves JetStream again."""
        self.nodes[index].restart()
        asyncio.run(self.wait_jetstream(self.start_timeout))

    async def restart_async(self, index: int) -> None:
        await self.nodes[index].restart_async()
        await self.wait_jetstream(self.start_timeout)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "EmbeddedCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> "EmbeddedCluster":
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)
