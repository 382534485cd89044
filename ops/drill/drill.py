"""`aotx drill`: a seeded recovery drill of the shared journal through the HTTP API.

A scenario load (scenarios.generate: alice and bob registering, creating spaces, conversations and
memberships, exact retries, changed inputs, stale and future sequences, retirements) runs through
the real gateway (`aotx gateway`) against a runtime process (ops.drill.node, the `aotx boot`
runtime) and a nats-server. At seeded random times the drill SIGKILLs the runtime, the
nats-server, or both, restarts them, and checks the client-side ledger:

* every acknowledged receipt is present and identical (retired ones answer 410), and the
  participants' counters are exactly what the acknowledged operations imply;
* a command whose answer was lost is retried with the exact same body until it is answered:
  it must be new exactly once (201) or answer the receipt of its sequence (200), never twice;
* a fresh runtime booted from the journal has the live runtime's state hash and the same
  receipts.

With inputs (the default; `--inputs-per-second 0` turns them off) the runtime loads the model and
a third principal posts shared inputs across conversations (ops/drill/inputs.py). Before each
kill of the runtime the drill posts a long input and kills right after its first output bytes
are saved; after the restart every acknowledged input has a saved terminal result, an input that
was running is `interrupted` and never runs again (its bytes do not grow), a completed input's
bytes are byte-identical, and no input's memory is retained twice (GET /spaces/{space}/memory).
Each check waits until every acknowledged input is terminal (the load pauses meanwhile).

`--cluster` (ops/drill/cluster_deploy.py) runs the same load and checks on a 3-node JetStream cluster with
two state-only runtimes in lease mode and two gateways, and the faults of that deployment take turns
(stream leader, follower, leader SIGSTOP, runtime, gateway); the live state hash of every runtime must
equal the fresh replay's. The Drill drives any deployment with the interface of cluster.Cluster.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nats.errors

from aotx.state import Grants
from aotx.state.rights import Actor
from scenarios import Model, Party, Runner, ScenarioViolation, steps_of

from .cluster import Cluster, DrillError
from .cluster_deploy import DEFAULT_LEASE_TTL, ClusterDeployment
from .inputs import INPUT_ACTOR, InputLoad, InputRecord

TARGETS = ("runtime", "nats", "both")
ACTORS = ("alice", "bob")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=1, help="seeds the load and the kill schedule (default 1)")
    p.add_argument("--kills", type=int, default=6, help="SIGKILLs to deliver (default 6; runtime, nats-server "
                                                        "and both take turns in a seeded order)")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    p.add_argument("--var", help="state directory (dev gateway config, runtime file, grants, nats store, logs); "
                                 "default: a new temporary directory, removed after a passing drill")
    p.add_argument("--retire-above", type=int, default=150,
                   help="retire a participant's receipts when it holds more than this many (default 150)")
    p.add_argument("--inputs-per-second", type=float, default=None,
                   help="shared inputs posted per second across conversations (default 2, 0 with --cluster; 0: no "
                        "inputs, and the runtime loads no model)")
    p.add_argument("--max-output-tokens", type=int, default=24,
                   help="most output tokens of an ordinary input (default 24; the victim input posted before a "
                        "runtime kill asks for more)")
    p.add_argument("--inputs-in-flight", type=int, default=4,
                   help="post no new input while this many are unfinished (default 4)")
    p.add_argument("--cluster", action="store_true",
                   help="a 3-node JetStream cluster, 2 state-only runtimes in lease mode and 2 gateways; the faults "
                        "(stream leader SIGKILL, follower SIGKILL, leader SIGSTOP past the RAFT election, runtime "
                        "SIGKILL, gateway SIGKILL) take turns (ops/drill/cluster_deploy.py)")
    p.add_argument("--lease-ttl", type=float, default=None,
                   help="--cluster: the runtimes' lease TTL in seconds (default 3)")


def kill_plan(seed: int, kills: int, duration: float, kinds: tuple[str, ...] = TARGETS) -> list[tuple[float, str]]:
    """(seconds after the load starts, fault kind): every kind appears once in each round of len(kinds)."""
    rng = random.Random(seed ^ 0x5EED)
    targets: list[str] = []
    while len(targets) < kills:
        round_ = list(kinds)
        rng.shuffle(round_)
        targets += round_
    slot = duration / max(kills, 1)
    return [(slot * i + rng.uniform(0.15, 0.75) * slot, t) for i, t in enumerate(targets[:kills])]


class Drill:
    def __init__(self, cluster: Cluster, seed: int, kills: int, duration: float, retire_above: int,
                 out=sys.stdout, *, inputs_per_second: float = 0.0, max_output_tokens: int = 24,
                 inputs_in_flight: int = 4) -> None:
        self.cluster, self.seed, self.duration, self.out = cluster, seed, duration, out
        self.plan = kill_plan(seed, kills, duration, cluster.FAULTS)
        self.retire_above = retire_above
        self.inputs_per_second, self.max_output_tokens = inputs_per_second, max_output_tokens
        self.inputs_in_flight = inputs_in_flight
        self.inputs: InputLoad | None = None
        self.input_checks = 0
        self.restart_mark = 0       # inputs acknowledged before the last runtime restart
        self.kills: Counter[str] = Counter()
        self.checks = 0
        self.hash_checks = 0
        self.recoveries: list[float] = []
        self.rng = random.Random(seed ^ 0xC0FFEE)
        self._last_unknown = -10

    def say(self, text: str) -> None:
        print(f"[drill {time.monotonic() - self.t0:6.1f}s] {text}", file=self.out, flush=True)

    async def run(self) -> int:
        self.t0 = time.monotonic()
        c = self.cluster
        await c.start()
        self.say(c.describe())
        transports = [c.transport(i) for i in range(len(ACTORS) + 1)]
        parties = {n: Party(n, c.token(n), transports[i]) for i, n in enumerate(ACTORS)}
        self.runner = Runner(parties, Model(list(ACTORS)), unknown_deadline_s=90.0,
                             retire_above=self.retire_above, lenient_capacity=True, on_unknown=self._unknown)
        self.lock = asyncio.Lock()
        try:
            await self.runner.sync()
            if self.inputs_per_second > 0:
                self.inputs = InputLoad(Party(INPUT_ACTOR, c.token(INPUT_ACTOR), transports[-1]),
                                        random.Random(self.seed ^ 0x1A9E7), max_tokens=self.max_output_tokens,
                                        say=self.say)
                await self.inputs.setup()
                self.say(f"{INPUT_ACTOR} posts inputs to {len(self.inputs.conversations)} conversations "
                         f"({self.inputs_per_second:g}/s, at most {self.max_output_tokens} output tokens)")
            stop = asyncio.Event()
            self.t_load = time.monotonic()
            loads = [asyncio.create_task(self._load(stop))]
            if self.inputs is not None:
                loads.append(asyncio.create_task(self._input_load(stop)))
            try:
                await self._kill_loop()
                rest = self.duration - (time.monotonic() - self.t_load)
                if rest > 0:
                    await asyncio.sleep(rest)
                if self.inputs is not None:
                    await self._settle()
            finally:
                stop.set()
                for task in loads:
                    await task
            async with self.lock:
                await self._check("final")
        finally:
            for t in {id(t): t for t in transports}.values():
                await t.close()
        self._summary()
        return 0

    def _unknown(self, why: str) -> None:
        n = self.runner.stats["unknown_answers"]
        if n - self._last_unknown > 1 or n == 1:  # the first of each streak
            self.say(f"no definitive answer, retrying the exact body: {why[:160]}")
        self._last_unknown = n

    async def _load(self, stop: asyncio.Event) -> None:
        steps = steps_of(self.seed, ACTORS)
        for i, step in enumerate(steps):
            if stop.is_set():
                break
            async with self.lock:
                await self.runner.run_step(step)
            if i % 200 == 0 and i:
                s = self.runner.stats
                self.say(f"{i} steps, {s['acked']} operations acknowledged, {s['unknown_answers']} unknown answers")

    async def _input_load(self, stop: asyncio.Event) -> None:
        """Inputs at a steady rate, none while `inputs_in_flight` are unfinished; posted under the drill's
        lock (paused while the ledger is checked)."""
        assert self.inputs is not None
        period = 1.0 / self.inputs_per_second
        due = time.monotonic()
        while not stop.is_set():
            due = max(due + period, time.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, due - time.monotonic()))
                break
            except asyncio.TimeoutError:
                pass
            await self.inputs.observe_unfinished("input load")
            if len(self.inputs.unfinished()) >= self.inputs_in_flight:
                self.inputs.stats["skipped_busy"] += 1
                continue
            async with self.lock:
                if stop.is_set():
                    break
                if await self.inputs.submit() is None:
                    self.say(f"{INPUT_ACTOR} has used her receipt budget: no more inputs")
                    return

    async def _settle(self, timeout: float = 120.0) -> None:
        """The load goes on until an input acknowledged after the last runtime restart has completed: the
        restarted runtime runs new inputs (the others of that time were interrupted, never re-run)."""
        assert self.inputs is not None
        deadline = time.monotonic() + timeout
        while True:
            await self.inputs.observe_unfinished("settling")
            after = list(self.inputs.ledger.values())[self.restart_mark:]
            done = [r for r in after if r.final is not None and r.final["execution"] == "completed"]
            if done:
                self.say(f"input {done[0].op}, acknowledged after the last runtime restart, completed")
                return
            if time.monotonic() > deadline:
                raise ScenarioViolation(f"no input acknowledged after the last runtime restart completed within "
                                        f"{timeout:g} s ({len(after)} acknowledged since)")
            await asyncio.sleep(0.2)

    async def _victim(self) -> InputRecord | None:
        """A long input, and the moment its first output bytes are saved (None when it never got there)."""
        assert self.inputs is not None
        async with self.lock:
            victim = await self.inputs.submit(victim=True)
        if victim is None:
            return None
        t0 = time.monotonic()
        if not await self.inputs.first_bytes(victim, timeout=60.0):
            self.say(f"victim input {victim.op} ended or saved no output within 60 s ({victim.execution}); "
                     "killing anyway")
            return None
        self.say(f"victim input {victim.op}: first {len(victim.data)} output bytes saved after "
                 f"{time.monotonic() - t0:.1f} s")
        return victim

    async def _kill_loop(self) -> None:
        c = self.cluster
        for when, target in self.plan:
            await asyncio.sleep(max(0.0, self.t_load + when - time.monotonic()))
            runtime_fault = target in c.RUNTIME_FAULTS
            if self.inputs is not None and runtime_fault:
                victim = await self._victim()
                await self.inputs.observe_unfinished("just before the kill")
                await self.inputs.before_runtime_kill(sum(self.kills.values()) + 1, victim)
            acked = self.runner.stats["acked"]
            done = await c.inject(target)
            t_kill = time.monotonic()
            self.kills[target] += 1
            self.say(f"{done} (after {acked} acknowledged operations)")
            await asyncio.sleep(self.rng.uniform(0.2, 1.5))
            said = await c.recover(target)
            if self.inputs is not None and runtime_fault:
                self.restart_mark = len(self.inputs.ledger)
            self.say(said)
            async with self.lock:  # the load pauses between steps while the ledger is checked
                self.recoveries.append(time.monotonic() - t_kill)
                await self._check(f"after {c.FAULT_WORD[:-1]} {sum(self.kills.values())} ({target})")

    async def _check(self, when: str) -> None:
        if self.inputs is not None:  # quiescence: every acknowledged input terminal, then read them all
            await self.inputs.wait_terminal(120.0, when)
            k = await self.inputs.verify(when)
            self.input_checks += k
            self.checks += k
        n = await self.runner.verify()
        self.checks += n
        lives, replay, fresh = await self._live_and_replay(when)
        try:
            for name in ACTORS:  # the fresh replay answers every live receipt identically
                actor = Actor(name, Grants.all())
                for r in self.runner.model.parties[name].receipts.values():
                    if r.body is None:
                        continue
                    got = await fresh.query("operation", actor, op=r.body["operation"])
                    if (got.status, got.body) != (200, r.body):
                        raise ScenarioViolation(f"{when}: fresh replay answers {got.status} {got.body} for "
                                                f"{r.body['operation']}, the ledger holds {r.body}")
                    n += 1
                    self.checks += 1
            for rec in (self.inputs.ledger.values() if self.inputs is not None else ()):
                got = await fresh.query("operation", Actor(INPUT_ACTOR, Grants.all()), op=rec.op)
                if got.status != 200 or got.body.get("execution") != rec.final["execution"]:
                    raise ScenarioViolation(f"{when}: fresh replay answers {got.status} {got.body} for input "
                                            f"{rec.op}, which is {rec.final['execution']}")
                out = await fresh.query("result", Actor(INPUT_ACTOR, Grants.all()), op=rec.op, offset=0)
                if out.status != 200 or base64.b64decode(out.body["bytes"]) != rec.final["bytes"]:
                    raise ScenarioViolation(f"{when}: fresh replay's result of input {rec.op} differs from the "
                                            "live one")
                n += 1
                self.checks += 1
        finally:
            await fresh.stop()
        self.hash_checks += 1
        which = "live state hash" if len(lives) == 1 else f"live state hash of all {len(lives)} runtimes"
        self.say(f"{when}: {n} ledger checks passed; {which} {replay[:16]}… = fresh replay "
                 f"({lives[0]['messages']} journal messages)")

    async def _live_and_replay(self, when: str, within: float = 30.0) -> tuple[list[dict], str, object]:
        """Every runtime's live state and a fresh replay at the same journal position, with equal hashes.
        A runtime that follows the others' writes may be a few messages behind, and a takeover may add a
        message after the replay: both are asked again until they meet (a real difference persists)."""
        deadline = time.monotonic() + within
        replay, fresh = await self.cluster.replay_hash()
        while True:
            lives = await self._live_states()
            for live in lives:
                if live.get("executing"):
                    await fresh.stop()
                    raise ScenarioViolation(f"{when}: every acknowledged input is terminal, yet a runtime still "
                                            f"holds {live['executing']} executions")
            if all(live["state_hash"] == replay for live in lives):
                return lives, replay, fresh
            ahead = any((live["messages"] or 0) > fresh.projector.messages for live in lives)
            if time.monotonic() > deadline:
                await fresh.stop()
                raise ScenarioViolation(f"{when}: live state hashes {[(x['state_hash'], x['messages']) for x in lives]}"
                                        f" != fresh replay {replay} ({fresh.projector.messages} journal messages)")
            if ahead:   # the journal grew after the replay: replay again
                await fresh.stop()
                replay, fresh = await self.cluster.replay_hash()
            else:
                await asyncio.sleep(0.1)

    async def _live_states(self) -> list[dict]:
        deadline = time.monotonic() + 30
        while True:
            try:
                lives = await self.cluster.live_states()
                failed = [live["failed"] for live in lives if live["failed"]]
                if not failed:
                    return lives
                raise DrillError(f"the runtime failed closed: {failed[0]}")
            except (nats.errors.Error, OSError, asyncio.TimeoutError) as exc:  # a node restarting: ask again
                if time.monotonic() > deadline:
                    raise DrillError(f"the runtime does not report its state: {type(exc).__name__}: {exc}")
                await asyncio.sleep(0.2)

    def _summary(self) -> None:
        s, c = self.runner.stats, self.cluster
        elapsed = time.monotonic() - self.t0
        statuses = ", ".join(f"{k[7:]}: {v}" for k, v in sorted(s.items()) if k.startswith("status_"))
        rec = (f"{min(self.recoveries):.1f}–{max(self.recoveries):.1f} s" if self.recoveries else "-")
        print(f"drill passed: seed {self.seed}, {elapsed:.1f} s\n"
              f"  operations acknowledged: {s['acked']} (of which {s['landed_before_failure']} landed before a "
              f"kill and were answered by their exact retry)\n"
              f"  exact retries answering the same receipt: {s['exact_retries_same_receipt']}\n"
              f"  answers by status: {statuses}; capacity refusals: {s['capacity_refusals']}\n"
              f"  unknown outcomes retried (no answer, 429, 503): {s['unknown_answers']}\n"
              f"  {c.FAULT_WORD}: {sum(self.kills.values())} ("
              + ", ".join(f"{label} {self.kills[k]}" for k, label in c.FAULT_LABELS.items())
              + f"); kill-to-checked recovery {rec}\n{c.summary()}"
              f"  checks passed: {self.checks} ledger checks, {self.hash_checks} live = fresh replay state hashes"
              + (f"\n  {self.inputs.summary()}\n  input checks passed: {self.input_checks}"
                 if self.inputs is not None else ""),
              file=self.out, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.inputs_per_second is None:
        args.inputs_per_second = 0.0 if args.cluster else 2.0
    if args.cluster and args.inputs_per_second > 0:
        print("aotx drill: --cluster runs state-only runtimes: no --inputs-per-second", file=sys.stderr)
        return 2
    if args.lease_ttl is not None and not args.cluster:
        print("aotx drill: --lease-ttl goes with --cluster", file=sys.stderr)
        return 2
    temp = args.var is None
    var = Path(tempfile.mkdtemp(prefix="aotx-drill-")) if temp else Path(args.var)
    inputs = args.inputs_per_second > 0
    if args.cluster:
        cluster = ClusterDeployment(var, seed=args.seed, lease_ttl=args.lease_ttl or DEFAULT_LEASE_TTL)
    else:
        cluster = Cluster(var, model=inputs, extra_principals=(INPUT_ACTOR,) if inputs else ())
    ok = False
    try:
        drill = Drill(cluster, args.seed, args.kills, args.duration, args.retire_above,
                      inputs_per_second=args.inputs_per_second, max_output_tokens=args.max_output_tokens,
                      inputs_in_flight=args.inputs_in_flight)
        rc = asyncio.run(drill.run())
        ok = rc == 0
        return rc
    except (ScenarioViolation, DrillError) as exc:
        print(f"drill FAILED: {exc}\n  logs and journal kept under {var}", file=sys.stderr, flush=True)
        return 1
    finally:
        cluster.stop()
        if temp and ok:
            shutil.rmtree(var, ignore_errors=True)
