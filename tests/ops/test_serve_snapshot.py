"""`aotx serve --snapshot-every N`: after kill -9 the next start boots from a snapshot plus the journal's tail
(its ready line says so) and answers every receipt and result exactly as before."""
from __future__ import annotations

import os
import re
import signal

from tests.server_process import ServerProcess
from tests.waiting import wait_until

from .client import SharedClient

ARGS = ("--max-batch", "4", "--kv-pages", "64", "--default-max-tokens", "8", "--snapshot-every", "4")
BOOTED = re.compile(r"booted from snapshot at seq (\d+) \+ (\d+) tail messages")
TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")


def _answers(client: SharedClient, op: str) -> tuple:
    """The operation's receipt and result answers, each error body without its request's own id."""
    def bare(answer):
        status, body = answer
        return status, ({k: v for k, v in body.items() if k != "request_id"} if isinstance(body, dict) else body)
    return bare(client.get(f"/operations/{op}")), bare(client.get(f"/operations/{op}/result"))


def _booted(server: ServerProcess) -> tuple[int, int] | None:
    for line in server.stderr_lines:
        m = BOOTED.search(line)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def test_serve_restarts_from_a_snapshot_with_the_same_receipts(tmp_path):
    var = tmp_path / "var"
    tokens: dict[str, str] = {}
    ops: dict[str, tuple[str, dict]] = {}
    first = ServerProcess(*ARGS, var=var).start()
    try:
        assert any("booted by full replay of 0 journal messages" in ln for ln in first.stderr_lines)
        tokens = {n: (var / "tokens" / n).read_text().strip() for n in ("alice", "bob")}
        alice, bob = SharedClient(first.base_url, tokens["alice"]), SharedClient(first.base_url, tokens["bob"])

        def ok(who: str, client: SharedClient, path: str, **fields) -> dict:
            status, receipt = client.post(path, **fields)
            assert status in (201, 202), receipt
            ops[receipt["operation"]] = (who, receipt)
            return receipt

        for who, client in (("alice", alice), ("bob", bob)):
            client.sync()
            ok(who, client, "/participant")
        bob_id = bob.get("/participant")[1]["participant"]
        room = ok("alice", alice, "/spaces", scope="room")["resource"]
        con = ok("alice", alice, f"/spaces/{room}/conversations")["resource"]
        for perms in (["read"], ["read", "write"], ["read"]):
            ok("alice", alice, f"/spaces/{room}/members", participant=bob_id, permissions=perms)
        model = alice.get("/capabilities")[1]["models"][0]["id"]
        said = ok("alice", alice, f"/conversations/{con}/inputs", text="Name a colour.", model=model,
                  max_output_tokens=4)
        wait_until(lambda: alice.get(f"/operations/{said['operation']}")[1], "the input to end",
                   done=lambda r: r["execution"] in TERMINAL)
        for _ in range(3):
            ok("bob", bob, "/spaces")
        answers = {op: _answers(SharedClient(first.base_url, tokens[who]), op) for op, (who, _) in ops.items()}
        os.kill(first.proc.pid, signal.SIGKILL)   # kill -9: an upload under way is simply lost
        first.proc.wait()
    finally:
        first.stop()

    second = ServerProcess(*ARGS, var=var).start()
    try:
        booted = _booted(second)
        assert booted is not None and booted[0] > 0, second.stderr_lines[-5:]
        for op, (who, _) in ops.items():
            client = SharedClient(second.base_url, tokens[who])
            assert _answers(client, op) == answers[op], op
        alice = SharedClient(second.base_url, tokens["alice"])
        alice.sync()
        alice.skip_keys(len(ops))
        assert alice.post("/spaces")[0] == 201
    finally:
        second.stop()
