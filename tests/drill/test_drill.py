"""A short `aotx drill`: SIGKILL of the runtime alone, nats-server alone and both, under load; the ledger holds."""
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


def test_short_drill(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ops.cli", "drill", "--seed", "3", "--kills", "3",
                           "--duration", "9", "--var", str(tmp_path / "var")],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "drill passed" in out
    assert re.search(r"kills: 3 \(runtime 1, nats-server 1, both 1\)", out), out
    acked = int(re.search(r"operations acknowledged: (\d+)", out).group(1))
    assert acked > 20, out
    hashes = int(re.search(r"(\d+) live = fresh replay state hashes", out).group(1))
    assert hashes == 4, out  # after each kill and at the end
    assert "SIGKILL runtime" in out and "SIGKILL nats" in out and "SIGKILL both" in out
