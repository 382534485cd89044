"""`aotx serve` with its embedded nats-server: dev tokens, /aotx/v1/shared, kill -9 of everything, restart."""
from __future__ import annotations

import json
import os
import signal
import stat

from tests.server_process import ServerProcess
from tests.waiting import process_gone, wait_until

from .client import SharedClient
from .procs import files_containing

ARGS = ("--max-batch", "4", "--kv-pages", "64", "--default-max-tokens", "8")


def _nats_pids(var) -> list[int]:
    return [int(p.stem.rsplit("_", 1)[1]) for p in (var / "nats" / "ports").glob("*.ports")]


def test_serve_shared_kill9_restart(tmp_path):
    var = tmp_path / "var"
    first = ServerProcess(*ARGS, var=var).start()
    try:
        assert any(f"tokens for alice and bob are in {var / 'tokens'}/" in ln for ln in first.stderr_lines)
        tokens = {n: (var / "tokens" / n).read_text().strip() for n in ("alice", "bob")}
        assert all(stat.S_IMODE((var / "tokens" / n).stat().st_mode) == 0o600 for n in tokens)
        config = json.loads((var / "gateway.json").read_text())
        assert sorted(config["principals"]) == ["alice", "bob"]
        assert SharedClient(first.base_url, None).get("/participant")[0] == 401
        # the model surfaces keep "loopback accepts any key"; shared tokens do not clash with them
        import httpx
        assert httpx.get(f"{first.base_url}/v1/models", headers={"Authorization": "Bearer x"}).status_code == 200
        alice, bob = SharedClient(first.base_url, tokens["alice"]), SharedClient(first.base_url, tokens["bob"])
        alice.sync()
        status, reg = alice.post("/participant")
        assert status == 201, reg
        status, sp = alice.post("/spaces", scope="room")
        assert status == 201
        status, con = alice.post(f"/spaces/{sp['resource']}/conversations")
        assert status == 201
        bob.sync()
        assert bob.post("/participant")[0] == 201
        assert bob.get(f"/conversations/{con['resource']}")[0] == 404
        acked = [reg, sp, con]
        nats_pids = _nats_pids(var)
        assert len(nats_pids) == 1
        os.kill(first.proc.pid, signal.SIGKILL)  # kill -9 of everything: the nats-server follows (PDEATHSIG)
        first.proc.wait()
        wait_until(lambda: process_gone(nats_pids[0]), f"the embedded nats-server (pid {nats_pids[0]}) to follow serve")
    finally:
        first.stop()
    config_bytes = (var / "gateway.json").read_bytes()

    second = ServerProcess(*ARGS, var=var).start()
    try:
        assert (var / "gateway.json").read_bytes() == config_bytes  # tokens reused
        alice = SharedClient(second.base_url, (var / "tokens" / "alice").read_text().strip())
        for receipt in acked:
            assert alice.get(f"/operations/{receipt['operation']}") == (200, receipt)
        me = alice.sync()
        assert me["registered"] and me["next_sequence"] == "4"
        alice.skip_keys(len(acked))  # a new client of the same lineage must not reuse operation keys
        assert alice.post("/spaces")[0] == 201
    finally:
        second.stop()
    logs = "\n".join(first.stderr_lines + second.stderr_lines)
    assert not [t for t in tokens.values() if t in logs]
    assert sorted(files_containing(var, list(tokens.values()))) == sorted(
        f"{var / 'tokens' / n}: {t[:16]}…" for n, t in tokens.items())
