"""One `aotx serve` per state directory: a second instance on the same `--var` exits at once with one
line and touches nothing (journal stream state, files); one on a taken port exits before it boots."""
from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path

from aotx.runtime_file import read_runtime_file
from tests.server_process import ServerProcess

from .client import SharedClient
from .procs import AOTX
from .store import journal_state

ARGS = ("--max-batch", "4", "--kv-pages", "64", "--default-max-tokens", "8")


def _files(var: Path) -> dict[str, tuple[int, int]]:
    """Every file outside the JetStream store: (size, mtime_ns); the store is compared as stream state."""
    store = var / "nats" / "jetstream"
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in var.rglob("*")
            if p.is_file() and store not in p.parents}


def _second(*args: str, timeout: float = 120.0) -> tuple[int, list[str]]:
    """Run another `aotx serve`; it must end by itself (a second serving instance is killed and fails)."""
    proc = subprocess.Popen([AOTX, "serve", *args, *ARGS], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the second aotx serve kept running:\n{err[-3000:]}") from None
    return proc.returncode, [ln for ln in err.splitlines() if ln.strip()]


def _run_input(client: SharedClient, con: str, model: str) -> dict:
    status, op = client.post(f"/conversations/{con}/inputs", text="Say yes.", model=model, max_output_tokens=4)
    assert status == 202, op
    deadline = time.monotonic() + 120
    while True:
        status, receipt = client.get(f"/operations/{op['operation']}")
        assert status == 200, receipt
        if receipt["execution"] in ("completed", "failed", "interrupted", "cancelled"):
            return receipt
        assert time.monotonic() < deadline, receipt
        time.sleep(0.05)


def test_second_serve_on_the_same_var_exits_at_once_and_touches_nothing(tmp_path):
    var = tmp_path / "var"
    first = ServerProcess(*ARGS, var=var).start()
    try:
        alice = SharedClient(first.base_url, (var / "tokens" / "alice").read_text().strip())
        alice.sync()
        assert alice.post("/participant")[0] == 201
        status, sp = alice.post("/spaces", scope="private")
        assert status == 201, sp
        status, con = alice.post(f"/spaces/{sp['resource']}/conversations")
        assert status == 201, con
        model = alice.get("/capabilities")[1]["models"][0]["id"]
        stream = read_runtime_file(var / "runtime.aotxrt").stream()[0]
        state, files = asyncio.run(journal_state(var, stream)), _files(var)

        for port in ("0", str(first.base_url.rsplit(":", 1)[1])):  # a free port, and the first server's
            code, lines = _second("--port", port, "--var", str(var))
            assert code != 0 and len(lines) == 1, lines
            assert "in use by another process" in lines[0] and str(var) in lines[0], lines
        assert asyncio.run(journal_state(var, stream)) == state  # nothing journalled (no boot, no interrupted)
        assert _files(var) == files                               # no file written or rewritten
        assert _run_input(alice, con["resource"], model)["execution"] == "completed"  # the first serves on
    finally:
        first.stop()


def test_serve_on_a_taken_port_exits_before_it_boots(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:   # any listener holds the port: no server start needed
        other = tmp_path / "b"
        code, lines = _second("--port", str(taken.getsockname()[1]), "--var", str(other))
        assert code != 0 and len(lines) == 1, lines
        assert "cannot bind" in lines[0] and "in use" in lines[0], lines
        assert not (other / "nats").exists()            # no nats-server started, nothing booted
        assert not (other / "runtime.aotxrt").exists()  # nothing written
