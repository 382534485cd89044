"""Shared inputs through the split deployment: `aotx boot` (the runtime with the model, numpy on CPU)
and `aotx gateway` (HTTP, RemoteRuntime) as two processes on one real nats-server.

The gateway serves the model surfaces too (`--model-surfaces`: over the boot's engine, one chat
completion with the openai SDK), and their stored state at the boot (stored Responses, a
previous_response_id chain, an Idempotency-Key replay, another token's 404). Input → 202 → the result read through the gateway until completed; the operation's SSE stream
delivers output then `end` as the runtime journals it; the conversation's SSE stream wakes on a new
input; a cancellation stops a long input; media uploads from the lone gateway; the runtime restarted
with --no-model answers the saved results and refuses new inputs with 409.
"""
from __future__ import annotations

import asyncio
import base64
import json

import openai
import pytest
from openai import OpenAI

from aotx.stored import StoredLimits

from api.gateway_config import ensure_dev_config, load_gateway_config
from aotx.runtime import GrantedRuntime, RemoteRuntime, RuntimeRpcServer, SharedRuntime, changed_subject, submit_body
from aotx.runtime.embedding import embedding_worker
from aotx.runtime_file import load_grants, pack_shared, write_grants
from aotx.snapshot import DEFAULT_EVERY, SnapshotPolicy
from aotx.state import Grants, MutationKind
from aotx.state.rights import Actor
from eventlog import DEFAULT_USER, EmbeddedNats, NatsUser
from ops.cli import build_parser
from kernels.embedding.process import EmbeddingProcess
from ops.model_args import runtime_options
from ops.nats_args import embedded_flags
from ops.nats_users import GATEWAY_USER, RUNTIME_USER, split_users
from ops.shared_stack import stream_spec
from tests.ops.client import SCHEMA, SharedClient
from tests.ops.procs import Proc
from tests.waiting import DEFAULT_TIMEOUT, wait_until

TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
LONG = 3600.0   # a wait timeout no test reaches: returning at all shows what woke it
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


def _stored_responses_through_the_gateway(oa: OpenAI, base: str, other_token: str) -> None:
    """Stored state through `aotx gateway --model-surfaces`, kept by the boot that writes the caller's
    lineage (aotx.runtime.RemoteStored): store + retrieve, a previous_response_id chain, an
    Idempotency-Key replay (byte for byte, marked), another bearer token's 404."""
    model = oa.models.list().data[0].id
    first = oa.responses.create(model=model, input="Name one colour.", store=True, max_output_tokens=3,
                                temperature=0)
    assert first.status in ("completed", "incomplete") and first.output_text
    got = oa.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text and got.store is True
    second = oa.responses.create(model=model, input="And another one.", previous_response_id=first.id,
                                 max_output_tokens=3, temperature=0)
    assert second.previous_response_id == first.id and second.usage.input_tokens > first.usage.input_tokens
    assert [i.content[0].text for i in oa.responses.input_items.list(second.id).data] == ["And another one."]
    keyed = dict(model=model, input="Say yes.", max_output_tokens=3, temperature=0,
                 extra_headers={"Idempotency-Key": "split-stored-1"})
    once = oa.responses.with_raw_response.create(**keyed)
    twice = oa.responses.with_raw_response.create(**keyed)
    assert twice.http_response.content == once.http_response.content
    assert twice.headers.get("Idempotent-Replayed") == "true" and "Idempotent-Replayed" not in once.headers
    other = OpenAI(base_url=base + "/v1", api_key=other_token)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(first.id)


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
                                      "--execution-deadline", "7", "--snapshot-every", "0",
                                      "--embedding-worker", "thread"])
    assert runtime_options(args) == {"execution_deadline": 7.0, "retention_mode": 2, "lease_revision": 5,
                                     "automatic_memory": True, "snapshots": None, "stored_limits": StoredLimits(),
                                     "embedder": None}
    args = build_parser().parse_args(["serve", "--embedding-worker", "process"])
    options = runtime_options(args)
    assert isinstance(options.pop("embedder"), EmbeddingProcess)   # a worker process, not started yet
    default = runtime_options(build_parser().parse_args(["serve"]))["embedder"]   # auto: a process from 4 CPUs on
    assert (default is None) == (embedding_worker("auto") == "thread")
    assert options == {"execution_deadline": 300.0, "retention_mode": 1, "lease_revision": 3,
                       "automatic_memory": False, "snapshots": SnapshotPolicy(every=DEFAULT_EVERY),
                       "stored_limits": StoredLimits()}
    args = build_parser().parse_args(["serve", "--idempotency-ttl", "90s"])
    assert runtime_options(args)["stored_limits"].idempotency_ttl == 90
    args = build_parser().parse_args(["serve", "--snapshot-every", "500", "--snapshot-interval", "60"])
    assert runtime_options(args)["snapshots"] == SnapshotPolicy(every=500, interval=60.0)
    for bad in (["--retention-mode", "3"], ["--lease-revision", "2"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["boot", "--runtime", "r", "--nats", "n", "--service-grants", "g", *bad])


async def test_remote_broker_hears_targeted_announcements(tmp_path):
    """The runtime announces what each change concerns; the gateway's broker (RemoteRuntime.broker)
    wakes only the readers it concerns: a rights change in one space wakes that space's conversation,
    not another's; nothing wakes a reader while nothing changes (no polling); a grant reload and an
    announcement that does not parse wake everyone. No bound on how fast: a wait that must end early
    is given a timeout it can never reach (LONG)."""
    rf, _ = pack_shared(tmp_path / "runtime.aotxrt", name="w1")
    everything = ["shared_read", "shared_write", "shared_manage"]
    write_grants(tmp_path / "grants", {"alice": everything, "bob": everything}, "ab" * 32)
    actors = {name: Actor(name, Grants.all()) for name in ("alice", "bob")}
    with split_nats(tmp_path / "nats", rf) as nats_server:
        url, runtime_auth = nats_server.url, nats_server.auth(RUNTIME_USER)
        target = GrantedRuntime(SharedRuntime(url, stream_spec(rf), progress=False, nats_auth=runtime_auth),
                                load_grants(tmp_path / "grants"))
        await target.start()
        server = await RuntimeRpcServer(target, url, rf.name, auth=runtime_auth).start()
        remote = await RemoteRuntime(url, rf.name, "ab" * 32, auth=nats_server.auth(GATEWAY_USER)).start()
        try:
            seqs = {name: iter(range(1, 100)) for name in actors}

            async def submit(kind: MutationKind, resource: str | None = None, who: str = "alice", **fields) -> dict:
                n = next(seqs[who])
                lineage = (await remote.query("participant", actors[who])).body["lineage"]
                raw = json.dumps({"schema": SCHEMA, "lineage": lineage, "operation_key": f"{n:032x}",
                                  "sequence": str(n), **fields}).encode()
                out = await submit_body(remote, actors[who], kind, raw, resource)
                assert out.status == 201, out.body
                return out.body

            await submit(MutationKind.REGISTER)
            pid = (await submit(MutationKind.REGISTER, who="bob"))["resource"]
            spaces = [(await submit(MutationKind.CREATE_SPACE, scope="room"))["resource"] for _ in range(3)]
            cons = [(await submit(MutationKind.CREATE_CONVERSATION, s))["resource"] for s in spaces]
            subs = [remote.broker.conversation(c) for c in cons]

            async def woken(sub) -> bool:
                return await asyncio.wait_for(sub.wait(LONG), DEFAULT_TIMEOUT) and sub.take().resync

            # bob's rights in a space concern every conversation of that space
            await submit(MutationKind.SET_MEMBER, spaces[0], participant=pid, permissions=["read"])
            assert await woken(subs[0])
            # a barrier: the runtime may announce one command in several messages (a part of it with the
            # next command's); announcements arrive in order, so once the third space's change has woken
            # its reader, every announcement of the commands before it has been heard
            await submit(MutationKind.SET_MEMBER, spaces[2], participant=pid, permissions=["read"])
            assert await woken(subs[2])
            for sub in subs[:2]:   # what came before (the runtime's first "all") is behind us now
                if sub.pending:
                    sub.take()
            everyone, wakeups = remote.broker.stats.everyone, subs[0].wakeups
            await submit(MutationKind.SET_MEMBER, spaces[1], participant=pid, permissions=["read"])
            assert await woken(subs[1])
            if remote.broker.stats.everyone == everyone:   # (an "all" meanwhile — a reconnect — wakes it too)
                assert not subs[0].pending and subs[0].wakeups == wakeups
            assert await subs[0].wait(0.3) is False        # nothing changes, nothing wakes it

            target.replace_grants(load_grants(tmp_path / "grants"))   # a grant reload: everyone reads again
            assert await woken(subs[0]) and await woken(subs[1])
            await server._nc.publish(changed_subject(rf.name), b"\xc1 not an announcement")
            assert await woken(subs[0]) and await woken(subs[1])
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
                      "--runtime-name", rf.name, "--port", "0", "--model-surfaces", "--engine-wait", "120",
                      ready=r"gateway on (http://\S+) ").start()
            procs.append(gw)
            # the model surfaces over the boot's engine (aotx.engine_pool), the split users' permissions
            oa = OpenAI(base_url=gw.match.group(1) + "/v1", api_key=(tokens / "alice").read_text().strip())
            chat = oa.chat.completions.create(model=oa.models.list().data[0].id, max_tokens=4, temperature=0,
                                              messages=[{"role": "user", "content": "Name one colour."}])
            assert chat.choices[0].message.content and 1 <= chat.usage.completion_tokens <= 4
            _stored_responses_through_the_gateway(oa, gw.match.group(1), (tokens / "bob").read_text().strip())
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
                                      model=model, max_output_tokens=400, temperature=0)
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
