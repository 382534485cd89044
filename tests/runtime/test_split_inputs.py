"""Shared inputs through the split deployment: `aotx boot` (the runtime with the model, numpy on CPU)
and `aotx gateway` (HTTP, RemoteRuntime) as two processes on one real nats-server.

Input → 202 → the result read through the gateway until completed; the operation's SSE stream
delivers output then `end` as the runtime journals it; the conversation's SSE stream wakes on a new
input; a cancellation stops a long input; media uploads from the lone gateway; the runtime restarted
with --no-model answers the saved results and refuses new inputs with 409.
"""
from __future__ import annotations

import asyncio
import base64
import json

import pytest

from api.gateway_config import ensure_dev_config, load_gateway_config
from aotx.runtime import GrantedRuntime, RemoteRuntime, RuntimeRpcServer, SharedRuntime, submit_body
from aotx.runtime_file import load_grants, pack_shared, write_grants
from aotx.snapshot import DEFAULT_EVERY, SnapshotPolicy
from aotx.state import Grants, MutationKind
from aotx.state.rights import Actor
from eventlog import DEFAULT_USER, EmbeddedNats, NatsUser
from ops.cli import build_parser
from ops.model_args import runtime_options
from ops.nats_args import embedded_flags
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec
from tests.ops.client import SCHEMA, SharedClient
from tests.ops.procs import Proc
from tests.waiting import DEFAULT_TIMEOUT, wait_until, wait_until_async

TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
LONG = 3600.0   # a wait_change timeout no test reaches: returning at all shows what woke it
MODEL_FLAGS = ("--backend", "numpy", "--max-batch", "4", "--kv-pages", "128", "--default-max-tokens", "8")


class Client(SharedClient):
    """The process-level shared client, with waits for an input's end and an SSE reader."""

    def receipt(self, op: str) -> dict:
        status, receipt = self.get(f"/operations/{op}")
        assert status == 200, receipt
        return receipt

    def wait(self, op: str) -> dict:
        return wait_until(lambda: self.receipt(op), f"{op} to end", done=lambda r: r["execution"] in TERMINAL)

    def sse(self, path: str, until, on_event=None) -> list[dict]:
        """Events of an SSE route until `until(events)` holds (or the server ends the stream)."""
        events: list[dict] = []
        with self.http.stream("GET", path, timeout=DEFAULT_TIMEOUT) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            block: dict = {}
            for line in r.iter_lines():
                if line.startswith(":"):
                    continue
                if line == "":
                    if block:
                        events.append(block)
                        if on_event is not None:
                            on_event(events)
                        if until(events):
                            return events
                    block = {}
                    continue
                name, _, value = line.partition(": ")
                block[name] = json.loads(value) if name == "data" else value
        return events


def split_nats(data_dir, rf) -> EmbeddedNats:
    """A nats-server with the split deployment's users (the runtime's, the gateway's) and `aotx`."""
    return EmbeddedNats(data_dir, users=(NatsUser(DEFAULT_USER), *split_users(rf.name, stream_spec(rf))))


def _boot(rf, srv: EmbeddedNats, grants, *extra: str) -> Proc:
    return Proc("boot", "--runtime", str(rf.path), *embedded_flags(srv, RUNTIME_USER), "--service-grants",
                str(grants), *extra,
                ready=rf"runtime {rf.name} booted \((\d+) journal messages.*; (inputs run on|no model)",
                timeout=90).start()


def test_boot_flags_reach_the_runtime_options():
    args = build_parser().parse_args(["boot", "--runtime", "r", "--nats", "n", "--service-grants", "g",
                                      "--retention-mode", "2", "--lease-revision", "5", "--automatic-memory",
                                      "--execution-deadline", "7", "--snapshot-every", "0"])
    assert runtime_options(args) == {"execution_deadline": 7.0, "retention_mode": 2, "lease_revision": 5,
                                     "automatic_memory": True, "snapshots": None}
    args = build_parser().parse_args(["serve"])
    assert runtime_options(args) == {"execution_deadline": 300.0, "retention_mode": 1, "lease_revision": 3,
                                     "automatic_memory": False, "snapshots": SnapshotPolicy(every=DEFAULT_EVERY)}
    args = build_parser().parse_args(["serve", "--snapshot-every", "500", "--snapshot-interval", "60"])
    assert runtime_options(args)["snapshots"] == SnapshotPolicy(every=500, interval=60.0)
    for bad in (["--retention-mode", "3"], ["--lease-revision", "2"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["boot", "--runtime", "r", "--nats", "n", "--service-grants", "g", *bad])


async def test_remote_wait_change_wakes_on_announcements(tmp_path):
    """RemoteRuntime.wait_change returns on the runtime's state-change announcement (not by polling), times
    out when nothing changes, and returns at once when a change was announced during this task's last read.
    No bound on how fast: a wait that must end early is given a timeout it can never reach (LONG)."""
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="w1")
    write_grants(tmp_path / "grants", {"alice": ["shared_read", "shared_write", "shared_manage"]}, "ab" * 32)
    alice = Actor("alice", Grants.all())
    with split_nats(tmp_path / "nats", rf) as nats_server:
        url, runtime_auth = nats_server.url, nats_server.auth(RUNTIME_USER)
        target = GrantedRuntime(SharedRuntime(url, stream_spec(rf), progress=False, nats_auth=runtime_auth),
                                load_grants(tmp_path / "grants"))
        await target.start()
        server = await RuntimeRpcServer(target, url, rf.name, auth=runtime_auth).start()
        remote = await RemoteRuntime(url, rf.name, "ab" * 32, auth=nats_server.auth(GATEWAY_USER)).start()
        loop = asyncio.get_running_loop()
        try:
            me = (await remote.query("participant", alice)).body
            heard = remote._announced
            began = loop.time()
            await remote.wait_change(0.3)  # nothing changes: the timeout
            assert loop.time() - began >= 0.25 and remote._announced == heard
            body = {"schema": SCHEMA, "lineage": me["lineage"], "operation_key": "01" * 16, "sequence": "1"}

            async def register() -> None:   # runs once the wait below has begun (it never yields before)
                assert (await submit_body(remote, alice, MutationKind.REGISTER, json.dumps(body).encode())).status == 201

            writer = loop.create_task(register())
            await asyncio.wait_for(remote.wait_change(LONG), DEFAULT_TIMEOUT)  # woken by the announcement
            assert remote._announced > heard
            await writer
            # announced after this task's last request was sent: no waiting at all
            await remote.query("participant", alice)
            heard = remote._announced
            other = loop.create_task(submit_body(remote, alice, MutationKind.CREATE_SPACE, json.dumps(
                {**body, "operation_key": "02" * 16, "sequence": "2", "scope": "private"}).encode()))
            await other
            await wait_until_async(lambda: remote._announced > heard, "the create-space announcement")
            waiter = loop.create_task(remote.wait_change(LONG))
            for _ in range(3):   # a few turns of the loop, no clock: it ends without waiting for anything
                await asyncio.sleep(0)
            assert waiter.done(), "wait_change waited although a change was announced since the last request"
        finally:
            await remote.stop()
            await server.stop()
            await target.stop()


def test_inputs_through_boot_and_gateway(tmp_path):
    var = tmp_path / "var"
    config_path, tokens, _ = ensure_dev_config(var)
    config = load_gateway_config(config_path)
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt")
    grants = tmp_path / "grants"
    write_grants(grants, config.actions(), config.config_sha256)
    procs: list[Proc] = []
    with split_nats(tmp_path / "nats", rf) as nats_server:
        try:
            boot = _boot(rf, nats_server, grants, *MODEL_FLAGS, "--retention-mode", "1", "--lease-revision", "3")
            procs.append(boot)
            assert boot.match.group(2) == "inputs run on"
            gw = Proc("gateway", "--config", str(config_path), *embedded_flags(nats_server, GATEWAY_USER),
                      "--runtime-name", rf.name, "--port", "0", ready=r"gateway on (http://\S+) ").start()
            procs.append(gw)
            alice = Client(gw.match.group(1), (tokens / "alice").read_text().strip())
            alice.sync()
            assert alice.post("/participant")[0] == 201
            status, sp = alice.post("/spaces", scope="private")
            assert status == 201, sp
            status, conv = alice.post(f"/spaces/{sp['resource']}/conversations")
            assert status == 201, conv
            con = conv["resource"]
            status, caps = alice.get("/capabilities")
            assert status == 200 and caps["routes"]["inputs"] and caps["routes"]["cancellations"], caps
            assert caps["routes"]["media"] is True
            model = caps["models"][0]["id"]

            # an input → 202; its result read through the gateway until completed
            status, receipt = alice.post(f"/conversations/{con}/inputs", text="Name one colour.", model=model,
                                         max_output_tokens=8)
            assert status == 202, receipt
            assert receipt["status"]["admission"] == "saved" and receipt["execution"] in ("queued", "running")
            op = receipt["operation"]
            done = alice.wait(op)
            assert done["execution"] == "completed" and done["status"]["terminal"] == "saved", done
            status, result = alice.get(f"/operations/{op}/result")
            assert status == 200, result
            data = base64.b64decode(result["bytes"])
            assert data and result["byte_length"] == len(data) == result["next_offset"]
            assert 1 <= result["output_tokens"] <= 8 and result["input_tokens"] > 3
            assert result["finish"] in ("stop", "length") and result["text"] == data.decode("utf-8")

            # SSE of a running input: output events as they are journalled, then `end`
            status, second = alice.post(f"/conversations/{con}/inputs", text="Count from one to ten.",
                                        model=model, max_output_tokens=8)
            assert status == 202, second
            op2 = second["operation"]
            events = alice.sse(f"/operations/{op2}/events", lambda ev: ev[-1]["event"] == "end")
            assert [e["event"] for e in events][-1] == "end" and events[0]["event"] == "output"
            assert {e["event"] for e in events[:-1]} == {"output"}
            streamed = b"".join(base64.b64decode(e["data"]["bytes"]) for e in events[:-1])
            end = events[-1]["data"]
            assert end["execution"] == "completed" and end["saved_bytes"] == len(streamed) > 0
            assert 1 <= end["output_tokens"] <= 8 and end["finish"] in ("stop", "length")
            status, result2 = alice.get(f"/operations/{op2}/result")
            assert base64.b64decode(result2["bytes"]) == streamed

            # the conversation's SSE stream: the inputs so far, then one posted while it waits
            posted: list[dict] = []

            def post_third(events: list[dict]) -> None:
                if len(events) == 2 and not posted:
                    status, third = alice.post(f"/conversations/{con}/inputs", text="Say hi.", model=model,
                                               max_output_tokens=2)
                    assert status == 202, third
                    posted.append(third)

            events = alice.sse(f"/conversations/{con}/events?stream=true", lambda ev: len(ev) >= 3,
                               on_event=post_third)
            assert [e["event"] for e in events] == ["input"] * 3
            assert events[2]["data"]["operation"] == posted[0]["operation"] and events[2]["data"]["text"] == "Say hi."
            alice.wait(posted[0]["operation"])

            # a cancellation stops a long input
            status, long = alice.post(f"/conversations/{con}/inputs", text="Write a very long story about the sea.",
                                      model=model, max_output_tokens=400)
            assert status == 202, long
            status, cancel = alice.post(f"/conversations/{con}/cancellations", target_sequence=long["sequence"])
            assert status == 201 and cancel["kind"] == "conversation.cancel", cancel
            stopped = alice.wait(long["operation"])
            assert stopped["execution"] == "cancelled" and stopped["result"]["finish"] == "cancelled", stopped
            assert stopped["result"]["output_tokens"] < 400

            # media uploads work from the lone gateway (the NATS object store)
            r = alice.http.post("/media", content=b"\x89PNG split media", headers={"Content-Type": "image/png"})
            assert r.status_code == 201, r.text
            again = alice.http.post("/media", content=b"\x89PNG split media", headers={"Content-Type": "image/png"})
            assert again.status_code == 200 and again.json()["sha256"] == r.json()["sha256"]

            # the runtime again, without a model: saved results answer, new inputs are refused 409
            boot.stop()
            boot = _boot(rf, nats_server, grants, "--no-model")
            procs.append(boot)
            assert boot.match.group(2) == "no model"
            assert alice.get(f"/operations/{op}/result") == (200, result)
            status, err = alice.post(f"/conversations/{con}/inputs", text="hello", model=model, max_output_tokens=2)
            assert status == 409, err
        finally:
            for p in reversed(procs):
                p.stop()
