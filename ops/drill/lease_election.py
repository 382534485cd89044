"""Does a held lease ride out an election of its bucket? (docs/SCALE.md, "Leases across a JetStream election")

`python -m ops.drill.lease_election [--fault kill|stop] [--ttl S] [--election S] [--watch S]`: a fresh
3-node cluster, one state-only runtime in lease mode holding one lineage; the lease bucket's stream leader
is SIGKILLed (or SIGSTOPped, then SIGCONTed after the watch); for `--watch` seconds it samples every 20 ms
whether the runtime may still write its lineage, and prints when renewals landed, how long the holder could
not write, whether it lost the lease, and whether its next command is saved. A drill, not a test: one
election takes 4–9 s (nats-server's election timeout).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from aotx.runtime import SharedRuntime, submit_body
from aotx.runtime.ownership import DEFAULT_ELECTION, DEFAULT_TTL, LeasePolicy
from aotx.state import Actor, Grants, MutationKind, lineage_for
from eventlog import EmbeddedCluster, StreamSpec, connect

SAMPLE = 0.02   # seconds between looks at may_write


def _body(name: str, seq: int, **fields) -> bytes:
    return json.dumps({"schema": "aotx.shared.mutation.v1", "lineage": lineage_for(name).hex(),
                       "operation_key": f"{seq:032x}", "sequence": str(seq), **fields}).encode()


async def _bucket_leader(cluster: EmbeddedCluster, stream: str) -> str:
    nc = await connect(cluster.urls, cluster.auth(), name="aotx-drill")
    try:
        return (await nc.jetstream().stream_info(stream)).cluster.leader
    finally:
        await nc.close()


async def drill(root: Path, fault: str, policy: LeasePolicy, watch: float) -> dict:
    cluster = EmbeddedCluster(root / "cluster")
    await cluster.start_async()
    try:
        rt = await SharedRuntime(cluster.urls, StreamSpec(name="ELECTION", subject_prefix="election.j"),
                                 progress=False, nats_auth=cluster.auth(), leases=policy).start()
        try:
            actor, lineage = Actor("alice", Grants.all()), lineage_for("alice")
            assert (await submit_body(rt, actor, MutationKind.REGISTER, _body("alice", 1))).status == 201
            stream = f"KV_{rt.ownership.bucket.name}"
            leader = await _bucket_leader(cluster, stream)
            node = next(n for n in cluster.nodes if n.settings.server_name == leader)
            lost: list[bytes] = []
            given = rt.ownership.on_lost
            rt.ownership.on_lost = lambda lin: (lost.append(lin), given(lin))
            last, renewals, unwritable = rt.ownership.held[lineage][1], [], 0
            t0 = time.monotonic()
            node.kill() if fault == "kill" else node.pause()
            while time.monotonic() - t0 < watch:
                unwritable += not rt.ownership.may_write(lineage)
                held = rt.ownership.held.get(lineage)
                if held is not None and held[1] != last:
                    last = held[1]
                    renewals.append(round(last - t0, 2))
                await asyncio.sleep(SAMPLE)
            if fault == "stop":
                node.resume()
            out = await submit_body(rt, actor, MutationKind.CREATE_SPACE, _body("alice", 2, scope="private"))
            return {"fault": f"{fault} of the bucket's leader {leader}", "policy": policy.describe(),
                    "new_leader": await _bucket_leader(cluster, stream), "renewals_sent_at": renewals,
                    "unwritable_s": round(unwritable * SAMPLE, 2), "lost": len(lost), "next_command": out.status}
        finally:
            await rt.stop()
    finally:
        await asyncio.to_thread(cluster.stop)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.drill.lease_election", description=__doc__.splitlines()[0])
    p.add_argument("--fault", choices=["kill", "stop"], default="kill")
    p.add_argument("--ttl", type=float, default=DEFAULT_TTL)
    p.add_argument("--election", type=float, default=DEFAULT_ELECTION)
    p.add_argument("--watch", type=float, default=20.0, help="seconds watched after the fault (default 20)")
    args = p.parse_args(argv)
    policy = LeasePolicy(ttl=args.ttl, election=args.election)
    with tempfile.TemporaryDirectory(prefix="aotx-lease-election-") as root:
        print(json.dumps(asyncio.run(drill(Path(root), args.fault, policy, args.watch))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
