"""Benchmark (not a test): what the runtime's change feed spends on one applied member-rights change, as
the state grows (issues 10/15: every runtime applies every runtime's writes, and hears each of them).

    .venv/bin/python -m ops.bench.space_readers [--conversations 200] [--inputs 2000] [--subscribers 16]

One runtime on a memory recorder (no nats-server: the feed's own CPU only; receipts table sized to the
load) with alice's room space
holding `--conversations` conversations and `--inputs` admitted inputs spread over them (a model context
without a model: admitted, never run). One set-member message is captured as the observers hear it and
replayed, as a follower hears another runtime's write (its transfers without the writer's event: the body
decoded, as a follower does), against, in the same run:

* scan: the old per-event work — the event decoded, every conversation of the space found by a numpy
  scan of the conversations table, every live execution slot walked for the inputs in them
  (aotx.runtime.space_readers.expand: the same algorithm, which the split deployment's announcer now runs
  once an announcement);
* named, N readers: the change feed's call now (the space named; the broker wakes that space's
  subscriptions by one lookup, each subscription's space resolved once) with `--subscribers`
  conversation readers open in the room (their wake-ups taken between calls);
* named, no reader: the same with no subscription (the feed skips the message).

Prints µs a message for each (best of 5 rounds of `--repeat` calls).
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time

from aotx.runtime import SharedRuntime, parse_submission
from aotx.runtime.observers import Applied
from aotx.runtime.space_readers import expand
from aotx.runtime.targets import targets_of
from aotx.state import Actor, Capacities, ExecutionContext, Grants, IdKind, ModelCaps, MutationKind, lineage_for, parse_id
from eventlog.memory import MemoryRecorder

M = MutationKind
ALICE, BOB = Actor("alice", Grants.all()), Actor("bob", Grants.all())


class Author:
    def __init__(self, rt: SharedRuntime, actor: Actor) -> None:
        self.rt, self.actor, self.seq = rt, actor, 0

    async def submit(self, kind: MutationKind, resource: str | None = None, **fields) -> dict:
        self.seq += 1
        raw = json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(self.actor.principal).hex(),
                          "operation_key": f"{self.seq:032x}", "sequence": str(self.seq), **fields}).encode()
        out = await self.rt.submit(self.actor, parse_submission(kind, raw, resource))
        assert out.status in (201, 202), out.body
        return out.body


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - t) / repeat * 1e6)
    return min(times)


async def bench(n_cons: int, n_inputs: int, n_subs: int, repeat: int) -> None:
    caps = Capacities(receipts=max(1024, n_cons + n_inputs + 64), conversations=max(4096, n_cons))
    rt = await SharedRuntime(capacities=caps, recorder=MemoryRecorder(), progress=False).start()
    try:
        rt.context = ExecutionContext({"scripted": ModelCaps(b"\x01" * 32)}, 8)
        alice, bob = Author(rt, ALICE), Author(rt, BOB)
        await alice.submit(M.REGISTER)
        await bob.submit(M.REGISTER)
        space = (await alice.submit(M.CREATE_SPACE, scope="room"))["resource"]
        cons = [(await alice.submit(M.CREATE_CONVERSATION, space))["resource"] for _ in range(n_cons)]
        for i in range(n_inputs):
            await alice.submit(M.INPUT, cons[i % n_cons], text="hi", model="scripted")
        heard: list[Applied] = []
        rt.observers.add(heard.append)
        bob_id = f"par-{lineage_for('bob').hex()}-{1:032x}"
        await alice.submit(M.SET_MEMBER, space, participant=bob_id, permissions=["read"])
        applied = heard[-1]
        rt.observers.remove(heard.append)
        followed = dataclasses.replace(applied, transfers=tuple(dataclasses.replace(t, event=None)
                                                                  for t in applied.transfers))
        state = rt.reads.state
        rid = parse_id(space, IdKind.SPACE)
        key = rid.lineage + rid.ident
        cs, ops, _ = expand(state, [key])
        assert len(cs) == n_cons and len(ops) == n_inputs, (len(cs), len(ops))

        def scan() -> None:
            targets_of(followed)   # the event decoded, as before
            expand(state, [key])

        print(f"space readers benchmark: {n_cons} conversations, {n_inputs} inputs in the space "
              f"({len(state.executions)} execution slots); µs a set-member message, best of 5 × {repeat}")
        t_scan = best(scan, max(1, repeat // 20))
        t_none = best(lambda: rt.changes(followed), repeat)
        subs = [rt.broker.conversation(cons[i % n_cons]) for i in range(n_subs)]

        def named() -> None:
            rt.changes(followed)
            for sub in subs:
                sub.take()

        named()   # each subscription's space resolved once
        assert all(sub.space == key for sub in subs)
        t_named = best(named, repeat)
        print(f"  scan (the old per-event work)      {t_scan:10.1f} µs")
        print(f"  named, {n_subs} readers in the space   {t_named:10.1f} µs  ({t_scan / t_named:.0f}× less)")
        print(f"  named, no reader (feed skips)      {t_none:10.1f} µs")
        print(json.dumps({"conversations": n_cons, "inputs": n_inputs, "subscribers": n_subs,
                          "scan_us": round(t_scan, 1), "named_us": round(t_named, 1), "none_us": round(t_none, 2)}))
        for sub in subs:
            sub.close()
    finally:
        await rt.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--subscribers", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args()
    asyncio.run(bench(args.conversations, args.inputs, args.subscribers, args.repeat))


if __name__ == "__main__":
    main()
