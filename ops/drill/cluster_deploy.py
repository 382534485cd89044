"""`aotx drill --cluster`'s deployment: a 3-node JetStream cluster (eventlog.EmbeddedCluster), two
state-only runtimes in lease mode (ops.drill.node --leases: `aotx boot --leases --no-model` plus the
drill's state reply, one subject each) and two `aotx gateway`s; the parties' HTTP clients prefer one
gateway each and fail over to the other (GatewayFailover).

The faults take turns (drill.kill_plan over FAULTS):
* `leader`: SIGKILL of the journal stream's RAFT leader, restarted on its store;
* `follower`: SIGKILL of a node that is not the journal's leader, restarted;
* `stop`: SIGSTOP of the journal's leader until another node is elected (that is, past the RAFT
  election timeout), then SIGCONT: it rejoins as a follower;
* `runtime`: SIGKILL of the runtime holding the most leases (the first of a tie, then the other): its
  leases expire within the TTL and the other runtime takes its lineages over at their next command; it
  restarts (a new boot) once none of its leases is left;
* `gateway`: SIGKILL of one gateway (they alternate): its clients fail over to the other, then it
  restarts on a new port and its clients go back to it.
"""
from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path

import httpx
import msgpack
import nats.errors
import nats.js.errors

from api.gateway_config import ensure_dev_config, load_gateway_config
from aotx.runtime import SharedRuntime
from aotx.runtime.ownership import lease_bucket_name
from aotx.runtime_file import pack_shared, write_grants
from eventlog import EmbeddedCluster, NatsUser, connect
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec

from .cluster import NODE_SNAPSHOT_EVERY, RUNTIME_FILE, Child, DrillError, state_subject
from .failover import GatewayFailover

RUNTIMES = 2
GATEWAYS = 2
DEFAULT_LEASE_TTL = 3.0
LEASES_WAIT = 30.0   # seconds a lease-bucket read is retried while the bucket does not answer


class ClusterDeployment:
    """Under `var`: dev gateway config and tokens, runtime file, grants, the nodes' stores, logs."""

    FAULTS = ("leader", "follower", "stop", "runtime", "gateway")
    FAULT_LABELS = {"leader": "stream leader SIGKILL", "follower": "follower SIGKILL",
                    "stop": "leader SIGSTOP past the election", "runtime": "runtime SIGKILL",
                    "gateway": "gateway SIGKILL"}
    FAULT_WORD = "faults"
    RUNTIME_FAULTS = ("runtime",)

    def __init__(self, var: Path, *, seed: int = 1, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.var, self.lease_ttl = var, lease_ttl
        self.rng = random.Random(seed ^ 0xC1A5)
        var.mkdir(parents=True, exist_ok=True)
        config_path, self.tokens_dir, _ = ensure_dev_config(var)
        self.config_path = config_path
        config = load_gateway_config(config_path)
        self.rf, _ = pack_shared(var / RUNTIME_FILE)
        self.spec = stream_spec(self.rf)
        write_grants(var / "grants", config.actions(), config.config_sha256)
        runtime_user, gateway_user = split_users(self.rf.name, self.spec)
        runtime_user = NatsUser(runtime_user.name, runtime_user.permissions.extended(
            subscribe_allow=(state_subject(self.rf.name, "*"),)))
        self.nats = EmbeddedCluster(var / "cluster", users=(NatsUser("aotx"), runtime_user, gateway_user))
        self.runtimes: list[Child | None] = [None] * RUNTIMES
        self.boots = [""] * RUNTIMES
        self.gateways: list[Child | None] = [None] * GATEWAYS
        self.base_urls = [""] * GATEWAYS
        self.transports: list[GatewayFailover] = []
        self.turns = {"runtime": 0, "gateway": 0}
        self.elections: list[float] = []        # SIGSTOP to a new leader, seconds
        self.expiries: list[float] = []         # runtime SIGKILL to the last of its leases gone, seconds
        self._down: int | None = None           # the node killed or stopped by the fault under way
        self._victim: int | None = None         # the runtime or gateway killed by it
        self._killed_at = 0.0

    # -- the Drill's interface ----------------------------------------------------------------
    @property
    def nats_url(self) -> str:
        return self.nats.urls

    def token(self, name: str) -> str:
        return (self.tokens_dir / name).read_text().strip()

    async def start(self) -> None:
        await self.nats.start_async()
        # every runtime and gateway at once on the fresh cluster: they all create the streams and buckets
        # (R3) at the same moment, which a boot (or a gateway's media store) survives (aotx.log_setup; it
        # failed with "nats: timeout" in session 6, when the drill started them one after the other)
        await asyncio.gather(*(self.start_runtime(i) for i in range(RUNTIMES)),
                             *(self.start_gateway(i) for i in range(GATEWAYS)))

    def describe(self) -> str:
        return (f"{len(self.nats.nodes)}-node cluster {self.nats.urls}; runtimes (lease TTL {self.lease_ttl:g} s) "
                f"pids {', '.join(str(r.proc.pid) for r in self.runtimes)}; gateways {', '.join(self.base_urls)}")

    def transport(self, index: int) -> GatewayFailover:
        t = GatewayFailover(self.base_urls, prefer=index % GATEWAYS)
        self.transports.append(t)
        return t

    async def inject(self, kind: str) -> str:
        if kind in ("leader", "stop"):
            self._down, leader = await self._leader()
            node = self.nats.nodes[self._down]
            if kind == "leader":
                node.kill()
                return f"SIGKILL of the journal's stream leader {leader}"
            node.pause()
            t0 = time.monotonic()
            new = await self._new_leader(leader)
            self.elections.append(time.monotonic() - t0)
            return f"SIGSTOP of the journal's stream leader {leader}; {new} elected after {self.elections[-1]:.1f} s"
        if kind == "follower":
            _, leader = await self._leader()
            self._down = self.rng.choice([i for i, n in enumerate(self.nats.nodes)
                                          if n.settings.server_name != leader])
            leases_leader = await self._ask_leader(self.nats.urls, f"KV_{lease_bucket_name(self.spec.name)}")
            self.nats.nodes[self._down].kill()
            return (f"SIGKILL of follower {self.nats.nodes[self._down].settings.server_name} (journal leader "
                    f"{leader}, lease bucket leader {leases_leader})")
        i = self._victim = self.turns[kind] % (RUNTIMES if kind == "runtime" else GATEWAYS)
        self.turns[kind] += 1
        if kind == "runtime":
            leases = list((await self.leases()).values())
            counts = [leases.count(b) for b in self.boots]
            if max(counts) > counts[i]:
                i = self._victim = counts.index(max(counts))
            held = counts[i]
            self.runtimes[i].kill()
            self._killed_at = time.monotonic()
            return f"SIGKILL of runtime {i} (boot {self.boots[i]}, holding {held} leases)"
        if kind == "gateway":
            self.gateways[i].kill()
            return f"SIGKILL of gateway {i} ({self.base_urls[i]})"
        raise ValueError(f"no fault kind {kind!r}")

    async def recover(self, kind: str) -> str:
        if kind in ("leader", "follower"):
            name = self.nats.nodes[self._down].settings.server_name
            await self.nats.restart_async(self._down)
            return f"node {name} restarted on its store"
        if kind == "stop":
            node = self.nats.nodes[self._down]
            node.resume()
            await self.nats.wait_jetstream(60)
            return f"SIGCONT node {node.settings.server_name}"
        i = self._victim
        if kind == "runtime":
            dead = self.boots[i]
            taken = await self._leases_gone(dead)
            self.expiries.append(time.monotonic() - self._killed_at)
            await self.start_runtime(i)
            return (f"runtime {i}'s leases gone {self.expiries[-1]:.1f} s after its SIGKILL (the other runtime holds "
                    f"{taken}); restarted as boot {self.boots[i]}: replayed {self.runtimes[i].match.group(1)} "
                    "journal messages")
        failed_over = sum(t.failovers for t in self.transports)
        await self.start_gateway(i)
        for t in self.transports:
            t.prefer_again()
        return f"gateway {i} restarted on {self.base_urls[i]} ({failed_over} client failovers so far)"

    def summary(self) -> str:
        def span(xs: list[float]) -> str:
            return f"{min(xs):.1f}–{max(xs):.1f} s" if xs else "-"
        return (f"  client failovers to the other gateway: {sum(t.failovers for t in self.transports)}; new leader "
                f"after SIGSTOP within {span(self.elections)}; a killed runtime's leases gone within "
                f"{span(self.expiries)} (TTL {self.lease_ttl:g} s)\n")

    def _all_alive(self) -> None:
        """Every runtime and gateway the drill did not kill is running: one that exits on its own fails the
        drill (its clients would fail over to the other and hide it)."""
        for child in (*self.runtimes, *self.gateways):
            if child is not None and not child.running:
                tail = child.log.read_text(errors="replace")[-3000:] if child.log.exists() else ""
                raise DrillError(f"{child.name} exited on its own (exit {child.proc.returncode}):\n{tail}")

    async def live_states(self) -> list[dict]:
        """Every runtime's live state (drill-only reply of ops.drill.node, one subject each)."""
        self._all_alive()
        nc = await connect(self.nats.urls, self.nats.auth("aotx"), name="aotx-drill", max_reconnect_attempts=0)
        try:
            out = []
            for i in range(RUNTIMES):
                msg = await nc.request(state_subject(self.rf.name, str(i)), b"", timeout=10)
                out.append(json.loads(msg.data))
            return out
        finally:
            await nc.close()

    async def replay_hash(self) -> tuple[str, SharedRuntime]:
        """A fresh runtime booted from the journal (not started on the RPC subject): its state hash."""
        fresh = SharedRuntime(self.nats.urls, self.spec, self.rf.capacities(), progress=False,
                              nats_auth=self.nats.auth("aotx"))
        await fresh.start()
        return fresh.state_hash(), fresh

    def stop(self) -> None:
        for node in self.nats.nodes:   # a paused node would keep its clients waiting: resume before stopping
            node.resume()
        for child in (*self.gateways, *self.runtimes):
            if child is not None:
                child.stop()
        self.nats.stop()

    # -- the processes ------------------------------------------------------------------------
    def _flags(self, user: str) -> list[str]:
        return ["--nats", self.nats.urls, "--nats-user", user,
                "--nats-password-file", str(self.nats.password_file(user))]

    async def start_runtime(self, i: int) -> None:
        self.runtimes[i] = await Child(
            f"runtime {i}", [sys.executable, "-m", "ops.drill.node", "--runtime", str(self.var / RUNTIME_FILE),
                             *self._flags(RUNTIME_USER), "--service-grants", str(self.var / "grants"),
                             "--no-model", "--leases", "--lease-ttl", str(self.lease_ttl), "--state-id", str(i),
                             "--snapshot-every", str(NODE_SNAPSHOT_EVERY)],
            self.var / "logs" / f"runtime{i}.log",
            r"drill node: runtime \S+ booted \((\d+) journal messages.*\) boot ([0-9a-f]+)", timeout=120).start()
        self.boots[i] = self.runtimes[i].match.group(2)

    async def start_gateway(self, i: int) -> None:
        self.gateways[i] = await Child(
            f"gateway {i}", [sys.executable, "-m", "ops.cli", "gateway", "--config", str(self.config_path),
                             *self._flags(GATEWAY_USER), "--runtime-name", self.rf.name, "--port", "0",
                             "--timeout", "3"],
            self.var / "logs" / f"gateway{i}.log", r"gateway on (http://\S+) ", timeout=120).start()
        self.base_urls[i] = self.gateways[i].match.group(1)
        await self._healthy(i)

    async def _healthy(self, i: int, within: float = 120.0) -> None:
        """Until GET /health answers 200: the ready line comes before the app's startup (the runtime
        link and the media store), which may still fail."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                try:
                    if (await http.get(self.base_urls[i] + "/health")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass   # not accepting yet, or it died: the next round says which
                if not self.gateways[i].running or time.monotonic() > deadline:
                    self._all_alive()
                    raise DrillError(f"gateway {i} did not answer /health within {within:g} s")
                await asyncio.sleep(0.1)

    # -- the cluster, seen from outside -------------------------------------------------------
    async def _leader(self, within: float = 60.0) -> tuple[int, str]:
        """The journal stream's RAFT leader: its node index and server name."""
        names = [n.settings.server_name for n in self.nats.nodes]
        deadline = time.monotonic() + within
        while True:
            leader = await self._ask_leader(self.nats.urls)
            if leader in names:
                return names.index(leader), leader
            if time.monotonic() > deadline:
                raise DrillError(f"the journal stream has no leader after {within:g} s")
            await asyncio.sleep(0.2)

    async def _new_leader(self, old: str, within: float = 60.0) -> str:
        """Asked of the nodes still running, until one of them names a leader other than `old`."""
        others = [n.url for n in self.nats.nodes if n.settings.server_name != old]
        deadline = time.monotonic() + within
        while True:
            for url in others:
                leader = await self._ask_leader(url)
                if leader and leader != old:
                    return leader
            if time.monotonic() > deadline:
                raise DrillError(f"no new journal leader elected {within:g} s after {old} was stopped")
            await asyncio.sleep(0.2)

    async def _ask_leader(self, url: str, stream: str | None = None) -> str | None:
        try:
            nc = await connect(url, self.nats.auth("aotx"), name="aotx-drill-leader", max_reconnect_attempts=0,
                               connect_timeout=2)
        except (nats.errors.Error, OSError, asyncio.TimeoutError):
            return None
        try:
            info = await nc.jetstream(timeout=2).stream_info(stream or self.spec.name)
            return info.cluster.leader if info.cluster else None
        except (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError):
            return None   # no leader yet, or the node asked is not answering
        finally:
            await nc.close()

    async def leases(self) -> dict[str, str]:
        """The lease bucket: lineage key → the boot holding it. A bucket that does not answer (its stream
        between leaders after a node's fault: the short drill's timeout of session 7) is asked again, for
        at most LEASES_WAIT seconds; then its error stops the drill."""
        deadline = time.monotonic() + LEASES_WAIT
        while True:
            try:
                return await self._leases_once()
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
                if time.monotonic() > deadline:
                    raise
                print(f"lease bucket did not answer ({type(exc).__name__}): asking again", file=sys.stderr)
                await asyncio.sleep(0.5)

    async def _leases_once(self) -> dict[str, str]:
        nc = await connect(self.nats.urls, self.nats.auth("aotx"), name="aotx-drill-leases", max_reconnect_attempts=0)
        try:
            kv = await nc.jetstream(timeout=5).key_value(lease_bucket_name(self.spec.name))
            try:
                keys = await kv.keys()
            except nats.js.errors.NoKeysError:
                return {}
            out = {}
            for key in keys:
                try:
                    entry = await kv.get(key)
                except nats.js.errors.KeyNotFoundError:
                    continue   # expired or released meanwhile
                out[key] = str(msgpack.unpackb(entry.value).get("boot", "")) if entry.value else ""
            return out
        finally:
            await nc.close()

    async def _leases_gone(self, boot: str) -> int:
        """Until no lease names `boot` (they expire within the TTL): how many the other runtimes hold then."""
        deadline = time.monotonic() + 4 * self.lease_ttl + 30
        while True:
            held = await self.leases()
            if boot not in held.values():
                return sum(1 for b in held.values() if b and b != boot)
            if time.monotonic() > deadline:
                raise DrillError(f"the leases of the killed boot {boot} did not expire within "
                                 f"{4 * self.lease_ttl + 30:g} s")
            await asyncio.sleep(0.2)

