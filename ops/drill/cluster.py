"""The drill's deployment: a nats-server (EmbeddedNats), the runtime process (with the model) and the
gateway process, each started, SIGKILLed and restarted on its own."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from api.gateway_config import add_dev_principal, ensure_dev_config, load_gateway_config
from aotx.runtime import SharedRuntime
from aotx.runtime_file import pack_shared, write_grants
from eventlog import EmbeddedNats, NatsUser, connect
from ops.nats_args import embedded_flags
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec

RUNTIME_FILE = "runtime.aotxrt"
# the drill's runtime: the numpy model, small budgets (a drill measures recovery, not speed)
NODE_MODEL_ARGS = ("--backend", "numpy", "--max-batch", "8", "--kv-pages", "512", "--default-max-tokens", "32")
NODE_SNAPSHOT_EVERY = 25   # snapshots often, so kills land during uploads and restarts boot from them


def state_subject(name: str, state_id: str | None = None) -> str:
    """The drill-only reply of the runtime process (ops.drill.node): its live state hash (of runtime
    `state_id` where the drill runs several)."""
    return f"aotx.drill.{name}.state" + (f".{state_id}" if state_id else "")


class DrillError(RuntimeError):
    pass


class Child:
    """A child process whose stderr goes to a log file; ready when a line matches `ready`."""

    def __init__(self, name: str, cmd: list[str], log: Path, ready: str, timeout: float = 60.0) -> None:
        self.name, self.cmd, self.log, self.ready, self.timeout = name, cmd, log, re.compile(ready), timeout
        self.proc: subprocess.Popen | None = None
        self.match: re.Match | None = None
        self._offset = 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def start(self) -> "Child":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                         env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        deadline = time.monotonic() + self.timeout
        while True:
            text = self.log.read_bytes()[self._offset:].decode("utf-8", "replace")
            m = self.ready.search(text)
            if m:
                self.match = m
                return self
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise DrillError(f"{self.name} did not start (exit {self.proc.returncode}):\n{text[-3000:]}")
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, no shutdown."""
        if self.running:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def stop(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class Cluster:
    """The one-node deployment of `aotx drill` (the interface the Drill drives: FAULTS and their labels,
    start, describe, transport, token, inject / recover a fault, live_states, replay_hash, stop).

    Under `var`: dev gateway config and tokens, runtime file, fresh grants, nats store, logs.

    The nats-server knows three users: the runtime's and the gateway's (ops.nats_users, the runtime's
    also answering the drill's state requests) and `aotx`, the drill's own (state requests, replays).

    `model`: the runtime loads the model (inputs run); `extra_principals` are added to the dev config."""

    FAULTS = ("runtime", "nats", "both")                 # SIGKILL of what: each once in each round of three
    FAULT_LABELS = {"runtime": "runtime", "nats": "nats-server", "both": "both"}
    FAULT_WORD = "kills"
    RUNTIME_FAULTS = ("runtime", "both")                 # the faults that kill the runtime (input victims)

    def __init__(self, var: Path, *, model: bool = True, extra_principals: tuple[str, ...] = ()) -> None:
        self.var = var
        self._transport = None
        self.model = model
        var.mkdir(parents=True, exist_ok=True)
        config_path, self.tokens_dir, _ = ensure_dev_config(var)
        for name in extra_principals:
            add_dev_principal(config_path, self.tokens_dir, name)
        self.config_path = config_path
        config = load_gateway_config(config_path)
        self.rf, _ = pack_shared(var / RUNTIME_FILE)
        write_grants(var / "grants", config.actions(), config.config_sha256)
        runtime_user, gateway_user = split_users(self.rf.name, stream_spec(self.rf))
        runtime_user = NatsUser(runtime_user.name, runtime_user.permissions.extended(
            subscribe_allow=(state_subject(self.rf.name),)))
        self.nats = EmbeddedNats(var / "nats", users=(NatsUser("aotx"), runtime_user, gateway_user))
        self.runtime: Child | None = None
        self.gateway: Child | None = None
        self.base_url = ""

    def token(self, name: str) -> str:
        return (self.tokens_dir / name).read_text().strip()

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats.port}"


    async def start_nats(self) -> None:
        await self.nats.start_async()

    async def start_runtime(self) -> None:
        self.runtime = await Child(
            "runtime", [sys.executable, "-m", "ops.drill.node", "--runtime", str(self.var / RUNTIME_FILE),
                        *embedded_flags(self.nats, RUNTIME_USER, self.nats_url),
                        "--service-grants", str(self.var / "grants"), "--snapshot-every", str(NODE_SNAPSHOT_EVERY),
                        *(NODE_MODEL_ARGS if self.model else ("--no-model",))],
            self.var / "logs" / "runtime.log", r"drill node: runtime \S+ booted \((\d+) journal messages").start()

    async def start_gateway(self) -> None:
        self.gateway = await Child(
            "gateway", [sys.executable, "-m", "ops.cli", "gateway", "--config", str(self.config_path),
                        *embedded_flags(self.nats, GATEWAY_USER, self.nats_url), "--runtime-name", self.rf.name,
                        "--port", "0", "--timeout", "3"],
            self.var / "logs" / "gateway.log", r"gateway on (http://\S+) ").start()
        self.base_url = self.gateway.match.group(1)

    async def start(self) -> None:
        await self.start_nats()
        await self.start_runtime()
        await self.start_gateway()

    def describe(self) -> str:
        return f"nats-server {self.nats_url}, runtime pid {self.runtime.proc.pid}, gateway {self.base_url}"

    def transport(self, index: int):
        """The HTTP client of party `index`: one gateway, one client for all."""
        from scenarios import HttpTransport
        if self._transport is None:
            self._transport = HttpTransport(self.base_url, timeout=10)
        return self._transport

    async def inject(self, kind: str) -> str:
        if kind in ("runtime", "both"):
            self.kill_runtime()
        if kind in ("nats", "both"):
            self.kill_nats()
        return f"SIGKILL {kind}"

    async def recover(self, kind: str) -> str:
        if kind in ("nats", "both"):
            await self.start_nats()
        if kind in ("runtime", "both"):
            await self.start_runtime()
            return f"runtime restarted: replayed {self.runtime.match.group(1)} journal messages"
        return "nats-server restarted"

    def summary(self) -> str:
        return ""

    async def live_states(self) -> list[dict]:
        return [await self.live_state()]

    def kill_runtime(self) -> None:
        if self.runtime is not None:
            self.runtime.kill()

    def kill_nats(self) -> None:
        self.nats.kill()

    def stop(self) -> None:
        for child in (self.gateway, self.runtime):
            if child is not None:
                child.stop()
        self.nats.stop()

    async def live_state(self) -> dict:
        """The running runtime's state hash (drill-only reply of ops.drill.node)."""
        nc = await connect(self.nats_url, self.nats.auth(), name="aotx-drill", max_reconnect_attempts=0)
        try:
            msg = await nc.request(state_subject(self.rf.name), b"", timeout=10)
            return json.loads(msg.data)
        finally:
            await nc.close()

    async def replay_hash(self) -> tuple[str, SharedRuntime]:
        """A fresh runtime booted from the journal (not started on the RPC subject): its state hash."""
        fresh = SharedRuntime(self.nats_url, stream_spec(self.rf), self.rf.capacities(), progress=False,
                              nats_auth=self.nats.auth())
        await fresh.start()
        return fresh.state_hash(), fresh
