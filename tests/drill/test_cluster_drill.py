"""A short `aotx drill --cluster` (issue 15 part 4): a 3-node JetStream cluster, two state-only runtimes in
lease mode, two gateways, the scenario load and its ledger; each of the five faults once (the journal's
stream leader SIGKILLed, a follower SIGKILLed, the leader SIGSTOPped until another is elected, the runtime
holding the most leases SIGKILLed and restarted, a gateway SIGKILLed while its clients fail over); after
each, the ledger and the live state hash of both runtimes = a fresh replay's."""
from __future__ import annotations

import re
import subprocess
import sys

from ops.drill import kill_plan
from ops.drill.cluster_deploy import ClusterDeployment


def test_the_cluster_faults_take_turns():
    kinds = ClusterDeployment.FAULTS
    plan = kill_plan(5, 10, 10.0, kinds)
    assert sorted(k for _, k in plan[:5]) == sorted(kinds) and sorted(k for _, k in plan[5:]) == sorted(kinds)


def test_short_cluster_drill(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ops.cli", "drill", "--cluster", "--seed", "5", "--kills", "5",
                           "--duration", "8", "--lease-ttl", "2", "--var", str(tmp_path / "var")],
                          capture_output=True, text=True, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"faults: 5 \(stream leader SIGKILL 1, follower SIGKILL 1, leader SIGSTOP past the election 1, "
                     r"runtime SIGKILL 1, gateway SIGKILL 1\)", out), out
    assert int(re.search(r"operations acknowledged: (\d+)", out).group(1)) > 20, out
    assert int(re.search(r"(\d+) live = fresh replay state hashes", out).group(1)) == 6, out   # 5 faults + final
    assert out.count("live state hash of all 2 runtimes") == 6, out
    assert re.search(r"elected after \d", out), out
    assert re.search(r"runtime \d's leases gone [\d.]+ s after its SIGKILL", out), out
    assert int(re.search(r"client failovers to the other gateway: (\d+)", out).group(1)) >= 1, out
