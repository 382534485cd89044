"""What each runtime of the cluster bench did with its time (issue 15 part 5): the differences of its
aotx.runtime.round_stats counters over the measured window, as one table row per runtime.

Columns: command rounds a second; commands, flights (lineages) and messages a round; the share of rounds
that were pipelined (begun while another was in flight); a round's mean milliseconds in each stage —
`ready` (the pre-round catch-up: STREAM.INFO, then a read-back where the log was ahead), `plan` (plan,
encode, send), `append` (sent → its answers seen, wall), `landed` (apply what landed, with the
read-backs of other writers' messages met between the round's own, then answer); the fraction of the
window the chain spent in rounds (the sum of those stages ÷ the window: near 1.00 the rounds run back to
back); the messages applied from what the follower heard a second (by its applier or a round's catch-up)
and the µs each took to apply, and the applier's share of the window waiting for / holding the lock; read-backs a second with their messages, and how often a
round's wait for the follower's consumer (aotx.runtime.catch_up.apply_to) ran out and read back instead; how many times a
command was taken into a round before it was answered (above 1: commands that waited for the next round,
aotx.runtime.dependencies), its mean wait in the queue before a round and in the runtime in all (ms); requests a second and their mean ms
(receipt → reply, their queue included); leases acquired in the window; the event loop thread's CPU.
"""
from __future__ import annotations

from typing import Sequence


def inside_rows(befores: Sequence[dict], afters: Sequence[dict], span: float) -> list[dict]:
    """One dict of derived figures per runtime over a window of `span` seconds (the counters read just
    before it and a little after it, once the clients stopped); empty where none were written."""
    rows = []
    for before, after in zip(befores, afters):
        if not after:
            rows.append({})
            continue
        d = {k: float(after.get(k, 0.0)) - float(before.get(k, 0.0)) for k in set(after) - {"at", "cpu"}}
        g = d.get
        rounds = g("rounds", 0.0) or 1.0
        taken = g("cmd_taken", 0.0) or 1.0
        answered = g("cmd_answered", 0.0) or 1.0
        follow = g("follow_fed", 0.0)   # applied from what the follower heard: by its applier or a round's catch-up
        stages = {k: g(f"round_{k}_s", 0.0) for k in ("ready", "plan", "append", "landed")}
        chain = stages["ready"] + stages["plan"] + g("round_append_wait_s", 0.0) + stages["landed"]
        rows.append({
            "followed_to_short": g("followed_to_short", 0.0) / span,
            "rounds_s": g("rounds", 0.0) / span,
            "cmds_round": g("cmd_taken", 0.0) / rounds,
            "flights_round": g("round_flights", 0.0) / rounds,
            "msgs_round": g("round_msgs", 0.0) / rounds,
            "pipelined": g("round_pipelined", 0.0) / rounds,
            **{f"{k}_ms": 1e3 * v / rounds for k, v in stages.items()},
            "catchup_info_ms": 1e3 * g("catchup_info_s", 0.0) / rounds,
            "catchup_read_ms": 1e3 * g("catchup_read_s", 0.0) / rounds,
            "landed_read_ms": 1e3 * g("landed_read_s", 0.0) / rounds,
            "chain_busy": chain / span,
            "follow_msgs_s": follow / span,
            "follow_us": 1e6 * g("follow_fed_s", 0.0) / follow if follow else 0.0,
            "follow_hold": g("follow_apply_s", 0.0) / span,
            "follow_wait": g("follow_lock_wait_s", 0.0) / span,
            "readbacks_s": g("readbacks", 0.0) / span,
            "readback_msgs_s": g("readback_msgs", 0.0) / span,
            "retaken": g("cmd_taken", 0.0) / answered,
            "queue_ms": 1e3 * g("cmd_queue_s", 0.0) / taken,
            "in_runtime_ms": 1e3 * g("cmd_in_runtime_s", 0.0) / answered,
            "rpc_s": g("rpc_requests", 0.0) / span,
            "rpc_ms": 1e3 * g("rpc_s", 0.0) / (g("rpc_requests", 0.0) or 1.0),
            "refused_s": sum(v for k, v in d.items() if k.startswith("rpc_status_") and k[-3:] not in ("200", "201"))
            / span,
            "leases": g("lease_acquired", 0.0),
        })
    return rows


def inside_table(levels: Sequence[tuple[int, list[dict], list[float]]]) -> str:
    """The markdown table: one row per runtime of each level (`levels`: (R, rows, main-thread cores))."""
    head = ("| R | # | rounds/s | cmds / flights / msgs a round | pipelined | ready (info + read) ms | plan ms | "
            "append ms | landed (read) ms | chain busy | followed msgs/s, µs each | follower lock wait / hold | "
            "read-backs/s (msgs/s), follower short/s | taken ÷ answered, queue / in runtime ms | rpc/s, ms (not 2xx/s) | leases | loop CPU |")
    lines = ["What each runtime did over the window (aotx.runtime.round_stats; a round's stages in mean ms):\n",
             head, "|" + "---:|" * (head.count("|") - 1)]
    for r, rows, main in levels:
        for i, (x, cpu) in enumerate(zip(rows, main)):
            if not x:
                lines.append(f"| {r} | {i} | (no counters) |" + " |" * 15)
                continue
            lines.append(
                f"| {r} | {i} | {x['rounds_s']:,.0f} | {x['cmds_round']:.1f} / {x['flights_round']:.1f} / "
                f"{x['msgs_round']:.1f} | {x['pipelined']:.2f} | {x['ready_ms']:.2f} ({x['catchup_info_ms']:.2f} + "
                f"{x['catchup_read_ms']:.2f}) | {x['plan_ms']:.2f} | {x['append_ms']:.2f} | {x['landed_ms']:.2f} "
                f"({x['landed_read_ms']:.2f}) | {x['chain_busy']:.2f} | {x['follow_msgs_s']:,.0f}, "
                f"{x['follow_us']:.0f} | {x['follow_wait']:.2f} / {x['follow_hold']:.2f} | {x['readbacks_s']:,.0f} "
                f"({x['readback_msgs_s']:,.0f}), {x['followed_to_short']:,.1f} | {x['retaken']:.2f}, {x['queue_ms']:.1f} / {x['in_runtime_ms']:.1f} | "
                f"{x['rpc_s']:,.0f}, {x['rpc_ms']:.1f} ({x['refused_s']:,.0f}) | {x['leases']:.0f} | {cpu:.2f} |")
    return "\n".join(lines)


def cpu_split(levels: Sequence[tuple[int, float, float]]) -> str:
    """What the runtimes' CPU says about scaling (`levels`: (R, mutations/s, the runtimes' cores summed)).
    With one runtime, its cores ÷ the rate is its CPU per own mutation, `a`. With R, every runtime applies
    every other runtime's messages too (one message a mutation here: each participant has one command at
    a time), so the runtimes' cores ≈ a·rate + b·(R − 1)·rate: `b`, the CPU per message of another runtime,
    is what is left. Were every runtime at a full core, R runtimes would do R ÷ (1 + (R − 1)·b/a) times one's."""
    one = next((rate, cores) for r, rate, cores in levels if r == 1) if any(r == 1 for r, _, _ in levels) else None
    if one is None or one[0] <= 0:
        return "(no 1-runtime level: no CPU split)"
    a = one[1] / one[0]
    lines = [f"CPU of the runtimes: {1e6 * a:.0f} µs per own mutation (1 runtime)."]
    for r, rate, cores in levels:
        if r < 2 or rate <= 0:
            continue
        b = (cores - a * rate) / ((r - 1) * rate)
        lines.append(f"{r} runtimes: {1e6 * b:.0f} µs per message of another runtime applied (b/a = {b / a:.2f}); "
                     f"at a full core each, {r} runtimes would do {r / (1 + (r - 1) * b / a):.2f}× one's.")
    return "\n".join(lines)
