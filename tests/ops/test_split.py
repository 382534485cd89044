"""Split deployment: `aotx boot` and `aotx gateway` as two processes against one nats-server.

Register and create a space through the gateway, restart the runtime, read the receipt back;
`aotx audit` prints the journal the runtime wrote; no token anywhere the runtime writes. The runtime and
the gateway connect as their own nats users (ops.nats_users); the audit as the server's `aotx` user;
a runtime without credentials is refused at once; no nats password in any log or file but its own.
"""
from __future__ import annotations

import queue
import re
import signal
import subprocess
import threading

import httpx

from api.gateway_config import ensure_dev_config
from eventlog import DEFAULT_USER, EmbeddedNats
from ops.nats_args import embedded_flags
from ops.nats_users import GATEWAY_USER, RUNTIME_USER

from .client import SharedClient
from .procs import AOTX, Proc, files_containing, run_aotx, split_nats


def _boot(rt, srv: EmbeddedNats, grants) -> Proc:
    """The runtime without a model (journal-core routes only; inputs through boot: tests/runtime/test_split_inputs)."""
    return Proc("boot", "--runtime", str(rt), *embedded_flags(srv, RUNTIME_USER), "--service-grants", str(grants),
                "--no-model", ready=r"runtime t1 booted \((\d+) journal messages").start()


def _gateway(config, srv: EmbeddedNats) -> Proc:
    return Proc("gateway", "--config", str(config), *embedded_flags(srv, GATEWAY_USER), "--runtime-name", "t1",
                "--port", "0", ready=r"gateway on (http://\S+) serves /aotx/v1/shared only").start()


def test_boot_and_gateway_over_nats(tmp_path):
    var = tmp_path / "var"
    config, tokens, _ = ensure_dev_config(var)
    secrets = [(tokens / n).read_text().strip() for n in ("alice", "bob")]
    rt, grants = tmp_path / "identity.aotxrt", tmp_path / "grants"
    assert run_aotx("pack", "--runtime", str(rt), "--shared", "--name", "t1").returncode == 0
    g = run_aotx("grants", "--config", str(config), "--out", str(grants))
    assert g.returncode == 0, g.stderr
    procs: list[Proc] = []
    with split_nats(tmp_path / "nats", rt) as nats_server:
        url = nats_server.url
        passwords = [nats_server.auth(u).password for u in (DEFAULT_USER, RUNTIME_USER, GATEWAY_USER)]
        try:
            refused = run_aotx("boot", "--runtime", str(rt), "--nats", url, "--service-grants", str(grants),
                               "--no-model")  # no credentials: refused at once, one line
            assert refused.returncode == 1 and "refused the connection" in refused.stderr, refused.stderr
            assert refused.stderr.strip().splitlines()[-1].startswith("aotx boot: the runtime did not boot")
            boot = _boot(rt, nats_server, grants)
            procs.append(boot)
            assert boot.match.group(1) == "0"
            gw = _gateway(config, nats_server)
            procs.append(gw)
            base = gw.match.group(1)
            alice, bob = SharedClient(base, secrets[0]), SharedClient(base, secrets[1])
            assert SharedClient(base, None).get("/participant")[0] == 401
            # the lone gateway: request ids on every answer, framework errors in the shared envelope with Allow
            health = httpx.get(f"{base}/health", headers={"x-request-id": "gw-1"})
            assert health.status_code == 200 and health.headers["x-request-id"] == "gw-1"
            trace = httpx.request("TRACE", f"{base}/aotx/v1/shared/spaces")
            assert trace.status_code == 405 and "GET" in trace.headers["allow"], trace.text
            assert set(trace.json()) == {"error", "request_id"} and re.fullmatch(r"req_[0-9a-f]{24}", trace.headers["x-request-id"])
            assert SharedClient(base, "not-a-token").get("/participant")[0] == 401

            alice.sync()
            status, reg = alice.post("/participant")
            assert status == 201, reg
            status, sp = alice.post("/spaces", scope="private")
            assert status == 201, sp
            space, op = sp["resource"], sp["operation"]
            bob.sync()
            assert bob.post("/participant")[0] == 201
            assert bob.get(f"/spaces/{space}")[0] == 404  # never leaks existence
            assert alice.get(f"/spaces/{space}")[0] == 200
            status, caps = alice.get("/capabilities")
            assert status == 200 and caps["limits"]["receipts"] == 1024 and caps["journal"]["hold"] is False

            boot.stop()
            status, err = alice.get(f"/operations/{op}")
            assert status == 503 and err["error"]["type"] == "runtime_unavailable"
            boot = _boot(rt, nats_server, grants)
            procs.append(boot)
            assert int(boot.match.group(1)) >= 3  # replayed what the first runtime wrote
            assert alice.get(f"/operations/{op}") == (200, sp)
            assert alice.get(f"/operations/{reg['operation']}") == (200, reg)
            assert alice.post(f"/spaces/{space}/conversations")[0] == 201  # and it writes on

            admin = embedded_flags(nats_server, DEFAULT_USER)
            audit = run_aotx("audit", *admin, "--no-follow", "--runtime", str(rt))
            assert audit.returncode == 0, audit.stderr
            lines = audit.stdout.splitlines()
            events = [re.search(r"event=(\S+)", ln).group(1) for ln in lines]
            assert events.count("runtime.boot") == 3  # two lineages by boot 1, alice's again by boot 2
            assert events.count("participant.registered") == 2
            assert f"operation={op} sequence=2" in audit.stdout
            assert "event=space.created" in audit.stdout and "event=conversation.created" in audit.stdout
            assert all(re.match(r"seq=\d+ lineage=[0-9a-f]{32} kind=\w+ transfer=\d+ event=", ln) for ln in lines)
            first = [ln for ln in lines if "participant.registered" in ln][0]
            assert f"lineage={alice.lineage}" in first and f"operation={reg['operation']} sequence=1" in first
            tail = run_aotx("audit", "--nats", nats_server.client_url(), "--no-follow", "--from", "3")  # URL form
            assert tail.stdout.splitlines() == [ln for ln in lines if int(ln.split()[0][4:]) >= 3]
            _follow(admin, lines, alice, space)
        finally:
            for p in reversed(procs):
                p.stop()
        stderr = "\n".join(p.stderr for p in procs) + audit.stderr + audit.stdout + refused.stderr + tail.stderr
    assert not [s for s in secrets + passwords if s in stderr]
    leaks = files_containing(tmp_path, secrets)
    assert sorted(leaks) == sorted(f"{tokens / n}: {s[:16]}…" for n, s in zip(("alice", "bob"), secrets))
    nats_dir = tmp_path / "nats"
    assert sorted(files_containing(tmp_path, passwords)) == sorted(
        [f"{nats_dir / 'users' / u}: {p[:16]}…" for u, p in zip((DEFAULT_USER, RUNTIME_USER, GATEWAY_USER), passwords)]
        + [f"{nats_dir / 'nats-server.conf'}: {p[:16]}…" for p in passwords])


def _follow(nats_flags: list[str], lines: list[str], alice: SharedClient, space: str) -> None:
    """Default mode tails: the existing transfers, then one written while it follows; SIGTERM ends it."""
    follow = subprocess.Popen([AOTX, "audit", *nats_flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    got: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [got.put(ln.rstrip("\n")) for ln in follow.stdout], daemon=True).start()
    try:
        assert [got.get(timeout=20) for _ in lines] == lines
        status, conv = alice.post(f"/spaces/{space}/conversations")
        assert status == 201
        assert f"event=conversation.created operation={conv['operation']}" in got.get(timeout=20)
    finally:
        follow.send_signal(signal.SIGTERM)
        assert follow.wait(timeout=15) == 0


def test_gateway_refused_by_runtime_with_grants_of_another_config(tmp_path):
    config, tokens, _ = ensure_dev_config(tmp_path / "var")
    other, _, _ = ensure_dev_config(tmp_path / "other")
    rt, grants = tmp_path / "rt", tmp_path / "grants"
    run_aotx("pack", "--runtime", str(rt), "--shared", "--name", "t1")
    run_aotx("grants", "--config", str(other), "--out", str(grants))
    with split_nats(tmp_path / "nats", rt) as nats_server:
        boot = _boot(rt, nats_server, grants)
        gw = None
        try:
            gw = _gateway(config, nats_server)
            alice = SharedClient(gw.match.group(1), (tokens / "alice").read_text().strip())
            status, err = alice.get("/participant")
            assert status == 503 and err["error"]["type"] == "grants_mismatch"
        finally:
            if gw is not None:
                gw.stop()
            boot.stop()
