"""SIGHUP reloads who may do what: a real `aotx serve` (and a split `aotx boot` + `aotx gateway`).

Edit the gateway config, send SIGHUP, and the next read of a principal whose grants shrank is
refused, his open SSE stream ends, a token added is accepted and a token removed is not; a config
that does not load is logged and the old one kept, the process lives on.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import threading
import time
from pathlib import Path

import httpx

from api.gateway_config import ensure_dev_config
from ops.nats_args import embedded_flags
from ops.nats_users import GATEWAY_USER, RUNTIME_USER
from tests.server_process import ServerProcess

from .client import BASE, SharedClient
from .procs import Proc, run_aotx, split_nats

ARGS = ("--max-batch", "2", "--kv-pages", "32", "--default-max-tokens", "4")
DEADLINE_S = 30.0


def until(check, what: str, timeout: float = DEADLINE_S):
    """Poll `check()` until it answers something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.05)


def edit_config(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc["principals"])
    tmp = path.with_name(".edit.tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, path)


class Stream:
    """An SSE response read line by line in a thread; `lines` gets None when it ends."""

    def __init__(self, base: str, token: str, path: str) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.status: int | None = None
        self.open = threading.Event()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._run, args=(base, token, path), daemon=True)
        self.thread.start()
        assert self.open.wait(DEADLINE_S) and self.status == 200, self.status

    def _run(self, base: str, token: str, path: str) -> None:
        try:
            with httpx.stream("GET", base + BASE + path, headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx.Timeout(10, read=60)) as r:
                self.status = r.status_code
                self.open.set()
                for line in r.iter_lines():
                    if line:                     # the blank lines between events left out
                        self.lines.put(line)
        finally:
            self.open.set()
            self.lines.put(None)

    def until_end(self) -> list[str]:
        while (line := self.lines.get(timeout=DEADLINE_S)) is not None:
            self.seen.append(line)
        return self.seen


def _room_with(alice: SharedClient, bob: SharedClient) -> tuple[str, str]:
    for who in (alice, bob):
        who.sync()
        assert who.post("/participant")[0] == 201
    status, sp = alice.post("/spaces", scope="room")
    assert status == 201, sp
    status, con = alice.post(f"/spaces/{sp['resource']}/conversations")
    assert status == 201, con
    pid = bob.sync()["participant"]
    assert alice.post(f"/spaces/{sp['resource']}/members", participant=pid, permissions=["read", "write"])[0] == 201
    return sp["resource"], con["resource"]


def test_sighup_reloads_the_gateway_config_of_aotx_serve(tmp_path):
    var = tmp_path / "var"
    server = ServerProcess(*ARGS, var=var).start()
    try:
        config = var / "gateway.json"
        tokens = {n: (var / "tokens" / n).read_text().strip() for n in ("alice", "bob")}
        alice, bob = SharedClient(server.base_url, tokens["alice"]), SharedClient(server.base_url, tokens["bob"])
        space, con = _room_with(alice, bob)
        assert bob.get(f"/spaces/{space}")[0] == 200
        stream = Stream(server.base_url, tokens["bob"], f"/conversations/{con}/events?stream=true")
        carol_token = "carol-" + "x" * 40
        carol = SharedClient(server.base_url, carol_token)
        assert carol.get("/participant")[0] == 401

        def shrink(principals):
            principals["bob"]["actions"] = []                       # every shared grant revoked
            principals["carol"] = {"token_sha256": hashlib.sha256(carol_token.encode()).hexdigest(),
                                   "actions": ["shared_read", "shared_write"]}   # a token added
        edit_config(config, shrink)
        server.proc.send_signal(signal.SIGHUP)
        until(lambda: bob.get(f"/spaces/{space}")[0] == 403, "bob's read refused after the reload")
        lines = stream.until_end()                                  # his open stream ended by itself
        assert lines[-2:] == ["event: error", lines[-1]] and '"forbidden"' in lines[-1], lines[-4:]
        assert bob.post("/spaces", scope="private")[0] == 403          # and his next admission
        assert carol.get("/participant")[0] == 200
        assert alice.get(f"/spaces/{space}")[0] == 200
        grants = json.loads((var / "grants" / "grants.json").read_text())
        assert grants["principals"]["bob"] == [] and "carol" in grants["principals"]

        # a config that does not load: logged, the old one kept, the process lives on
        config.write_text("{ not json")
        server.proc.send_signal(signal.SIGHUP)
        until(lambda: any("not reloaded" in ln for ln in server.stderr_lines), "the failed reload logged")
        assert server.proc.poll() is None
        assert carol.get("/participant")[0] == 200 and bob.get(f"/spaces/{space}")[0] == 403

        # a token removed, grants given back
        config.write_text(json.dumps({"principals": {
            "alice": {"token_sha256": hashlib.sha256(tokens["alice"].encode()).hexdigest(),
                      "actions": ["shared_manage", "shared_read", "shared_write"]},
            "bob": {"token_sha256": hashlib.sha256(tokens["bob"].encode()).hexdigest(),
                    "actions": ["shared_read"]}}}))
        server.proc.send_signal(signal.SIGHUP)
        until(lambda: carol.get("/participant")[0] == 401, "carol's token refused after the reload")
        assert bob.get(f"/spaces/{space}")[0] == 200
        failed = [json.loads(ln) for ln in server.stderr_lines if "not reloaded" in ln]
        assert failed and failed[0]["level"] == "error" and failed[0]["event"] == "reload_failed"
    finally:
        server.stop()
    assert not [t for t in tokens.values() if t in "\n".join(server.stderr_lines)]


def test_sighup_reloads_a_split_gateway_and_runtime(tmp_path):
    """`aotx gateway` rereads its config, `aotx boot` its grant file (issued again with `aotx grants`)."""
    config, tokens_dir, _ = ensure_dev_config(tmp_path / "var")
    tokens = {n: (tokens_dir / n).read_text().strip() for n in ("alice", "bob")}
    rt, grants = tmp_path / "rt.aotxrt", tmp_path / "grants"
    assert run_aotx("pack", "--runtime", str(rt), "--shared", "--name", "t1").returncode == 0
    assert run_aotx("grants", "--config", str(config), "--out", str(grants)).returncode == 0
    procs: list[Proc] = []
    with split_nats(tmp_path / "nats", rt) as nats_server:   # the runtime and the gateway as their own users
        try:
            boot = Proc("boot", "--runtime", str(rt), *embedded_flags(nats_server, RUNTIME_USER),
                        "--service-grants", str(grants), "--no-model", ready=r"runtime t1 booted").start()
            procs.append(boot)
            gw = Proc("gateway", "--config", str(config), *embedded_flags(nats_server, GATEWAY_USER),
                      "--runtime-name", "t1", "--port", "0", ready=r"gateway on (http://\S+) ").start()
            procs.append(gw)
            base = gw.match.group(1)
            alice, bob = SharedClient(base, tokens["alice"]), SharedClient(base, tokens["bob"])
            space, con = _room_with(alice, bob)
            stream = Stream(base, tokens["bob"], f"/conversations/{con}/events?stream=true")

            edit_config(config, lambda p: p["bob"].update(actions=["shared_write"]))
            assert run_aotx("grants", "--config", str(config), "--out", str(grants)).returncode == 0
            boot.proc.send_signal(signal.SIGHUP)
            gw.proc.send_signal(signal.SIGHUP)
            until(lambda: bob.get(f"/spaces/{space}")[0] == 403, "bob's read refused after the reloads")
            lines = stream.until_end()
            assert lines[-2] == "event: error", lines[-4:]
            assert alice.get(f"/spaces/{space}")[0] == 200       # the runtime took the gateway's new config
            # a grant file that does not load: logged by the runtime, the old one kept
            (grants / "grants.json").write_text("{}")
            boot.proc.send_signal(signal.SIGHUP)
            until(lambda: "not reloaded" in boot.stderr, "the runtime's failed reload logged")
            assert boot.proc.poll() is None and alice.get(f"/spaces/{space}")[0] == 200
        finally:
            for p in reversed(procs):
                p.stop()
