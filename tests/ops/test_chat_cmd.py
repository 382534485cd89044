"""`aotx chat` driven in a pseudo-terminal (pexpect) against the session's `aotx serve`: a plain chat whose
second turn carries the first (stored history through previous_response_id), and a shared conversation where
another member's input and the model's answer stream in, with /members, /memory, /cancel and /quit."""
from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import httpx
import pexpect
import pytest

from ops.chat.shared import short
from tests.ops.client import SharedClient
from tests.waiting import wait_until

TIMEOUT = 120   # seconds for one expected line: the real model on a busy 2-core box
TRAILER = re.compile(r"\[(resp_[0-9a-zA-Z_]+) · (\d+) tokens in · (\d+) out\]")


def _chat(*args: str) -> pexpect.spawn:
    exe = Path(sys.executable).with_name("aotx")
    return pexpect.spawn(str(exe), ["chat", *args], encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 400))


def _quit(child: pexpect.spawn) -> None:
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before


def test_plain_chat_second_turn_carries_the_first(server):
    child = _chat("--base-url", server.base_url, "--max-tokens", "12")
    try:
        child.expect_exact("you> ")
        child.sendline("My name is Zora.")
        child.expect_exact("model> ")
        child.expect(TRAILER)
        first, in1, out1 = child.match.group(1), int(child.match.group(2)), int(child.match.group(3))
        child.expect_exact("you> ")
        child.sendline("What is my name?")
        child.expect(TRAILER)
        second, in2 = child.match.group(1), int(child.match.group(2))
        _quit(child)
    finally:
        child.close(force=True)
    assert in2 > in1 + out1   # the model read the first turn and its answer again
    stored = httpx.get(f"{server.base_url}/v1/responses/{second}", headers={"Authorization": "Bearer aotx-chat"})
    assert stored.status_code == 200 and stored.json()["previous_response_id"] == first


@pytest.fixture(scope="module")
def room(server):
    """alice's room with bob in it (read, write) and one conversation."""
    tokens = {n: (server.var / "tokens" / n).read_text().strip() for n in ("alice", "bob")}
    alice, bob = (SharedClient.fresh_keys(server.base_url, tokens[n]) for n in ("alice", "bob"))
    for who in (alice, bob):
        if not who.sync()["registered"]:
            assert who.post("/participant")[0] == 201
            who.sync()
    status, space = alice.post("/spaces", scope="room")
    assert status == 201, space
    status, _ = alice.post(f"/spaces/{space['resource']}/members", participant=bob.sync()["participant"],
                           permissions=["read", "write"])
    assert status == 201
    status, con = alice.post(f"/spaces/{space['resource']}/conversations")
    assert status == 201, con
    yield {"space": space["resource"], "con": con["resource"], "bob": bob,
           "alice_token": server.var / "tokens" / "alice"}
    alice.close()
    bob.close()


def _answer_text(bob: SharedClient, op: str) -> str:
    receipt = wait_until(lambda: bob.get(f"/operations/{op}")[1], f"{op} to end",
                         done=lambda r: r.get("execution") in ("completed", "cancelled", "failed"))
    assert receipt["execution"] == "completed", receipt
    status, result = bob.get(f"/operations/{op}/result")
    assert status == 200, result
    return base64.b64decode(result["bytes"]).decode("utf-8")


def test_shared_chat_prints_others_inputs_and_answers_and_runs_its_commands(server, room):
    bob = room["bob"]
    child = _chat("--base-url", server.base_url, "--token-file", str(room["alice_token"]),
                  "--conversation", room["con"], "--max-tokens", "16")
    try:
        child.expect_exact(f"joined {room['con']} in space {room['space']}")
        status, receipt = bob.post(f"/conversations/{room['con']}/inputs", text="Hello from Bob, say hi.",
                                   model="smollm2-135m-instruct", max_output_tokens=12)
        assert status == 202, receipt
        child.expect_exact(f"[{short(bob.sync()['participant'])}] Hello from Bob, say hi.")
        child.expect_exact("model> ")
        answer = _answer_text(bob, receipt["operation"])
        child.expect_exact(answer.split("\n")[0][:40])

        child.sendline("/members")
        child.expect_exact(f"members of {room['space']}: ")
        child.expect_exact(f"{bob.sync()['participant']} read,write")

        child.sendline("/memory")
        child.expect(r"memory of \S+: [1-9]\d* object\(s\)")
        child.expect_exact("Hello from Bob, say hi.")

        child.sendline("/cancel")
        child.expect_exact("nothing to cancel")
        child.sendline("Count from 1 to 500, one number per line.")
        child.expect_exact("[you] Count from 1 to 500, one number per line.")
        child.sendline("/cancel")
        child.expect(r"\(cancellation of your input \d+ saved\)")
        child.expect_exact("(cancelled)")
        _quit(child)
    finally:
        child.close(force=True)


def test_a_space_alone_gets_a_new_conversation(server, room):
    child = _chat("--base-url", server.base_url, "--token-file", str(room["alice_token"]), "--space", room["space"])
    try:
        child.expect(r"created conversation (con-[0-9a-f]{32}-[0-9a-f]{32})")
        con = child.match.group(1)
        child.expect_exact(f"joined {con} in space {room['space']}")
        child.sendline("/help")
        child.expect_exact("/members, /memory, /cancel (your last input), /help, /quit")
        _quit(child)
    finally:
        child.close(force=True)
    status, doc = room["bob"].get(f"/conversations/{con}")
    assert status == 200 and doc["space"] == room["space"]


def test_a_shared_chat_needs_a_token(monkeypatch, capsys):
    from ops import cli
    monkeypatch.delenv("AOTX_API_KEY", raising=False)
    assert cli.main(["chat", "--space", "spc-x"]) == 2
    assert "--token-file" in capsys.readouterr().err
