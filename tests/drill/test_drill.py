"""A short `aotx drill`: SIGKILL of the runtime alone, nats-server alone and both, under load with shared
inputs running on the runtime's model; the ledger holds, inputs killed mid-generation are interrupted
and never re-run, no memory input is retained twice."""
from __future__ import annotations

import re
import subprocess
import sys

from ops.drill import kill_plan


def test_kill_plan_is_seeded_and_covers_every_target():
    plan = kill_plan(7, 6, 30.0)
    assert plan == kill_plan(7, 6, 30.0) and plan != kill_plan(8, 6, 30.0)
    assert sorted(t for _, t in plan[:3]) == ["both", "nats", "runtime"]
    assert all(0 < when < 30 for when, _ in plan) and [w for w, _ in plan] == sorted(w for w, _ in plan)


def test_short_drill_with_inputs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ops.cli", "drill", "--seed", "3", "--kills", "3",
                           "--duration", "9", "--max-output-tokens", "16", "--var", str(tmp_path / "var")],
                          capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "drill passed" in out
    assert re.search(r"kills: 3 \(runtime 1, nats-server 1, both 1\)", out), out
    acked = int(re.search(r"operations acknowledged: (\d+)", out).group(1))
    assert acked > 20, out
    hashes = int(re.search(r"(\d+) live = fresh replay state hashes", out).group(1))
    assert hashes == 4, out  # after each kill and at the end
    assert "SIGKILL runtime" in out and "SIGKILL nats" in out and "SIGKILL both" in out
    # inputs: both runtime kills landed mid-generation of a victim, which is interrupted; the restarted
    # runtime completed a new input
    inputs = int(re.search(r"inputs acknowledged: (\d+)", out).group(1))
    assert inputs >= 3, out
    assert re.search(r"victims killed mid-generation: 2 of 2, interrupted 2", out), out
    by = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", re.search(r"by execution: ([^\n]*)", out).group(1))}
    assert by.get("completed", 0) >= 1 and by.get("interrupted", 0) >= 2, out
    assert "acknowledged after the last runtime restart, completed" in out
    assert int(re.search(r"input checks passed: (\d+)", out).group(1)) > inputs, out
    memories = re.search(r"text memories (\d+) \(at most one per input, none repeated\)", out)
    assert memories and int(memories.group(1)) <= inputs, out
