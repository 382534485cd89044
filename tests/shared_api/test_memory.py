"""Memory of shared inputs end to end: a real nats-server, the real model, the real embedding model.

Each input is retained (text, source, embedding; + interpretation in mode 2) in its space; a later
input of that space recalls it into its prompt, rendered by the lease revision; reads list rows and
exact payload bytes, for readers of the space only; two private spaces of one owner never share;
publication copies a text memory into another space; boot replays memory to the same digest; an
input whose journal write hit a hold resumes once it lifts.
"""

from __future__ import annotations

import base64
import threading

import pytest

from aotx.chat_types import ChatMessage
from aotx.memory import SourceRecord, render_memory
from aotx.runtime import SharedRuntime
from aotx.runtime import memory_work as mw
from aotx.runtime.executor import default_embedder
from eventlog import JournalFull
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app
from .test_inputs import _wait

HELD_BOUND = 60.0   # seconds: a bound on a wait that must end, so that the old behaviour fails instead of hanging


async def _register(*parties):
    for who in parties:
        await who.sync()
        assert (await who.post("/participant", who.body()))[0] == 201


async def _space(owner, scope="private") -> tuple[str, str]:
    status, sp = await owner.post("/spaces", owner.body(scope=scope))
    assert status == 201, sp
    status, conv = await owner.post(f"/spaces/{sp['resource']}/conversations", owner.body())
    assert status == 201, conv
    return sp["resource"], conv["resource"]


async def _say(who, con: str, text: str, model: str, tokens: int = 4, **sampling) -> dict:
    status, receipt = await who.post(f"/conversations/{con}/inputs",
                                     who.body(text=text, model=model, max_output_tokens=tokens, **sampling))
    assert status == 202, receipt
    done = await _wait(who, receipt["operation"])
    assert done["execution"] == "completed", done
    return done


async def _memory(who, space: str) -> list[dict]:
    status, body = await who.get(f"/spaces/{space}/memory")
    assert status == 200, body
    return body["memory"]


async def _result(who, op: str) -> dict:
    status, body = await who.get(f"/operations/{op}/result")
    assert status == 200, body
    return body


def _no_memory_prompt(service, text: str) -> int:
    return len(service.chat_prompt([ChatMessage(role="user", content=text)]))


async def test_retain_recall_read_and_replay(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob = p["alice"], p["bob"]
        await _register(alice, bob)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        room, con = await _space(alice, "room")
        first = await _say(alice, con, "Our team's deploy day is Thursday.", model)
        # the first input of a space recalls nothing: its prompt is the plain user turn
        assert first["result"]["input_tokens"] == _no_memory_prompt(service, "Our team's deploy day is Thursday.")

        rows = await _memory(alice, room)
        assert sorted(r["kind"] for r in rows) == ["embedding", "source", "text"]
        text_row = next(r for r in rows if r["kind"] == "text")
        assert text_row["owner"] == room and text_row["room"] == room and text_row["scope"] == "room"
        assert text_row["version"] == "1" and text_row["byte_length"] == str(len(b"Our team's deploy day is Thursday."))
        status, one = await alice.get(f"/memory/{text_row['object']}")
        assert status == 200 and base64.b64decode(one["data"]) == b"Our team's deploy day is Thursday."
        status, part = await alice.get(f"/memory/{text_row['object']}?offset=11")
        assert status == 200 and base64.b64decode(part["data"]) == b"deploy day is Thursday."
        assert part["next_offset"] == text_row["byte_length"]
        src = next(r for r in rows if r["kind"] == "source")
        status, src_read = await alice.get(f"/memory/{src['object']}")
        record = SourceRecord.decode(base64.b64decode(src_read["data"]))
        assert record.mode == 1 and record.sequence == int(first["sequence"])
        emb = next(r for r in rows if r["kind"] == "embedding")
        assert emb["source"] == text_row["object"] and text_row["source"] == src["object"]

        # readers of the space only: bob is not a member (404 for the list and for the object)
        assert (await bob.get(f"/spaces/{room}/memory"))[0] == 404
        assert (await bob.get(f"/memory/{text_row['object']}"))[0] == 404
        assert (await alice.get("/memory/" + "0" * 32))[0] == 404
        assert (await alice.get("/memory/xyz"))[0] == 400

        # a later input of the space recalls the earlier one into its prompt (rev 3 rendering)
        question = "Which day do we deploy?"
        second = await _say(alice, con, question, model)
        vector = default_embedder().embed([question])[0]
        store = runtime.memory
        room_raw = bytes.fromhex(room[4:36]) + bytes.fromhex(room[37:])
        recalled = [r for r in store.recall(room_raw, vector, mw.RECALL_K) if r.text.id != bytes.fromhex(
            next(x for x in await _memory(alice, room) if x["kind"] == "text" and x["object"] != text_row["object"])
            ["object"])]
        rendered = render_memory(3, recalled)
        assert "Our team's deploy day is Thursday." in rendered.context
        expected = len(service.chat_prompt(mw.prompt_messages(rendered, question)))
        assert second["result"]["input_tokens"] == expected > _no_memory_prompt(service, question)
        # the page budget's bound of a recall is conservative: the bare prompt + the bound covers the real prompt
        assert mw.memory_prompt_bound(mw.visible_entry_bytes(store, room_raw)) > 0
        assert _no_memory_prompt(service, question) + mw.memory_prompt_bound(
            mw.entry_bound(len(b"Our team's deploy day is Thursday."), None)) >= expected
        assert mw.memory_prompt_bound(0) == 0
        assert len([r for r in await _memory(alice, room) if r["kind"] == "text"]) == 2

        # boot = replay: the same state and memory digest
        fresh = await SharedRuntime(nats_url, runtime.spec, progress=False).start()
        try:
            assert fresh.memory.digest() == runtime.memory.digest() and fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


async def test_two_private_spaces_of_one_owner_share_nothing(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        a, con_a = await _space(alice)
        b, con_b = await _space(alice)
        await _say(alice, con_a, "The vault code is 4711.", model)
        assert len(await _memory(alice, a)) == 3 and await _memory(alice, b) == []
        text = "What is the vault code?"
        done = await _say(alice, con_b, text, model)
        assert done["result"]["input_tokens"] == _no_memory_prompt(service, text)   # recalled nothing of space a


async def test_publication(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service) as (runtime, p, client):
        alice, bob, carol = p["alice"], p["bob"], p["carol"]
        await _register(alice, bob, carol)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        private, con = await _space(alice)
        dest, _ = await _space(alice, "room")
        carol_id = (await carol.sync())["participant"]
        assert (await alice.post(f"/spaces/{dest}/members", alice.body(participant=carol_id,
                                                                      permissions=["read"])))[0] == 201
        await _say(alice, con, "Release notes live in the wiki.", model)
        rows = await _memory(alice, private)
        text = next(r for r in rows if r["kind"] == "text")
        emb = next(r for r in rows if r["kind"] == "embedding")

        body = alice.body(object=text["object"], source_version="1")
        status, receipt = await alice.post(f"/spaces/{dest}/publications", body)
        assert status == 201 and receipt["kind"] == "space.publish" and receipt["resource"] == dest, receipt
        assert await alice.post(f"/spaces/{dest}/publications", body) == (200, receipt)   # exact retry
        copies = await _memory(alice, dest)
        assert sorted(r["kind"] for r in copies) == ["embedding", "source", "text"]
        assert not {r["object"] for r in copies} & {r["object"] for r in rows}       # distinct new objects
        assert all(r["owner"] == dest and r["scope"] == "room" for r in copies)
        assert all(r["owner"] == private and r["scope"] == "private" for r in await _memory(alice, private))
        copy = next(r for r in copies if r["kind"] == "text")
        assert base64.b64decode((await carol.get(f"/memory/{copy['object']}"))[1]["data"]) == \
            b"Release notes live in the wiki."
        assert (await carol.get(f"/memory/{text['object']}"))[0] == 404        # the original stays private
        assert (await bob.get(f"/spaces/{dest}/memory"))[0] == 404

        # refusals change nothing
        for obj, version, want in ((emb["object"], "1", 409), (text["object"], "2", 409), ("ab" * 16, "1", 404)):
            status, err = await alice.post(f"/spaces/{dest}/publications",
                                           alice.body(object=obj, source_version=version))
            assert status == want, err
        status, err = await alice.post(f"/spaces/{dest}/publications", alice.body(object=emb["object"],
                                                                                  source_version="1"))
        assert err["error"]["type"] == "unsupported_kind"
        # carol may read dest but not manage it; nor read alice's private space
        status, err = await carol.post(f"/spaces/{dest}/publications",
                                       carol.body(object=text["object"], source_version="1"))
        assert status in (403, 404), err
        assert len(await _memory(alice, dest)) == 3

        fresh = await SharedRuntime(nats_url, runtime.spec, progress=False).start()
        try:
            assert fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


async def test_mode_2_interpretation_and_revision_4(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service, retention_mode=2, automatic_memory=True,
                          lease_revision=4) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        caps = (await alice.get("/capabilities"))[1]
        model = caps["models"][0]["id"]
        assert caps["models"][0]["automatic_memory"] is True
        space, con = await _space(alice)
        done = await _say(alice, con, "Please remember that lunch is at noon.", model)
        assert done["lease"]["revision"] == 4 and done["lease"]["retention_mode"] == 2, done
        rows = await _memory(alice, space)
        assert sorted(r["kind"] for r in rows) == ["embedding", "interpretation", "source", "text"]
        interp = next(r for r in rows if r["kind"] == "interpretation")
        data = base64.b64decode((await alice.get(f"/memory/{interp['object']}"))[1]["data"])
        assert data and data.decode("utf-8")
        question = "When is lunch?"
        second = await _say(alice, con, question, model)
        recalled = runtime.memory.recall(bytes.fromhex(space[4:36]) + bytes.fromhex(space[37:]),
                                         default_embedder().embed([question])[0], 8)
        first_only = [r for r in recalled if r.text.payload == b"Please remember that lunch is at noon."]
        rendered = render_memory(4, first_only)
        assert "interpretation: " in rendered.context and rendered.context.count("[participant") == 1
        assert second["result"]["input_tokens"] == len(service.chat_prompt(mw.prompt_messages(rendered, question)))


async def test_mode_2_requested_without_the_capability_records_mode_1(nats_url, service):
    async with shared_app(nats_url, fresh_spec(), service=service, retention_mode=2) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        space, con = await _space(alice)
        done = await _say(alice, con, "Hello there.", model)
        assert done["lease"]["retention_mode"] == 1
        assert sorted(r["kind"] for r in await _memory(alice, space)) == ["embedding", "source", "text"]


async def test_an_input_resumes_after_a_journal_hold(nats_url, service):
    spec = fresh_spec(max_bytes=96 * 1024)
    async with shared_app(nats_url, spec, service=service, probe_interval=0.1) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        _, con_ref = await _space(alice)
        _, con = await _space(alice)
        text = "Count from one to forty in words."
        reference = await _say(alice, con_ref, text, model, tokens=48, temperature=0)   # greedy: comparable
        status, receipt = await alice.post(f"/conversations/{con}/inputs",
                                           alice.body(text=text, model=model, max_output_tokens=48, temperature=0))
        assert status == 202
        op = receipt["operation"]
        await wait_until_async(lambda: _result(alice, op), f"{op}'s first saved output bytes",
                               done=lambda body: body["saved_bytes"])
        filler = spec.subject("f" * 32, "filler")
        with pytest.raises(JournalFull):
            for i in range(100_000):
                await runtime.recorder.append(filler, b"x" * 512, msg_id=f"fill-{i}")
        # its next output write meets the full stream: the runtime holds
        await wait_until_async(lambda: runtime.hold.active, "the runtime to hold the full journal")
        assert (await alice.get(f"/operations/{op}"))[1]["execution"] == "running"
        await runtime.recorder.js.purge_stream(spec.name, subject=filler)
        done = await _wait(alice, op)
        assert done["execution"] == "completed", done
        result = (await alice.get(f"/operations/{op}/result"))[1]
        ref = (await alice.get(f"/operations/{reference['operation']}/result"))[1]
        assert result["bytes"] == ref["bytes"] and result["output_tokens"] == ref["output_tokens"]
        fresh = await SharedRuntime(nats_url, spec, progress=False).start()
        try:
            assert fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


def test_grouping_takes_the_head_of_the_queue_within_the_budget():
    from aotx.runtime.grouping import Candidate, claim_group
    q = [Candidate(b"a" * 16, i, pages, since=float(i)) for i, pages in enumerate((10, 20, 5, 1))]

    def within(budget):
        left = [budget]

        def claim(c):
            if c.pages > left[0]:
                return None
            left[0] -= c.pages
            return c.sequence
        return claim
    assert claim_group(q, within(30)) == [0, 1]     # 10 + 20; the 5 waits behind nothing it would overtake
    assert claim_group(q, within(29)) == [0]        # 20 does not fit: the group stops, nobody overtakes
    assert claim_group(q, within(9)) == []


class HeldEmbedder:
    """The real embedding model, each call waiting (in its worker thread, bounded) for `release`."""

    def __init__(self) -> None:
        self.inner, self.release = default_embedder(), threading.Event()

    def embed(self, texts):
        assert self.release.wait(HELD_BOUND), "the embedding was never released"
        return self.inner.embed(texts)


class SubmitSpy:
    """The model service, noting each prompt asked of its engine."""

    def __init__(self, service) -> None:
        self._service, self.prompts = service, []

    def __getattr__(self, name):
        return getattr(self._service, name)

    def submit(self, prompt, params, **kw):
        self.prompts.append(list(prompt))
        return self._service.submit(prompt, params, **kw)


async def test_with_nothing_to_recall_generation_starts_while_the_embedding_is_computed(nats_url, service):
    embedder, spy = HeldEmbedder(), SubmitSpy(service)
    async with shared_app(nats_url, fresh_spec(), service=spy, embedder=embedder) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        space, con = await _space(alice)
        text = "Remember that the boat leaves at nine."
        status, receipt = await alice.post(f"/conversations/{con}/inputs",
                                           alice.body(text=text, model=model, max_output_tokens=8))
        assert status == 202, receipt
        # a space with no memory recalls nothing whatever the vector: the prompt (the bare user turn) goes
        # to the engine while the embedding, needed only for the memory input, is still being computed
        await wait_until_async(lambda: spy.prompts, "the input to be asked of the engine while its embedding is held",
                               timeout=HELD_BOUND)
        assert spy.prompts == [service.chat_prompt([ChatMessage(role="user", content=text)])]
        # its first output is saved (readers see it) while the embedding is still held: only its end, which
        # carries the memory input, waits for the vector
        op = receipt["operation"]
        await wait_until_async(lambda: _result(alice, op), "output saved while the embedding is held",
                               timeout=HELD_BOUND, done=lambda r: r["saved_bytes"] > 0)
        assert (await alice.get(f"/operations/{op}"))[1]["execution"] == "running"
        assert await _memory(alice, space) == []
        embedder.release.set()
        done = await _wait(alice, op)
        assert done["execution"] == "completed" and done["result"]["input_tokens"] == _no_memory_prompt(service, text)
        # the memory input still goes into the log (at the latest with the input's end), embedding and all
        rows = await _memory(alice, space)
        assert sorted(r["kind"] for r in rows) == ["embedding", "source", "text"]
        fresh = await SharedRuntime(nats_url, runtime.spec, progress=False).start()
        try:
            assert fresh.memory.digest() == runtime.memory.digest() and fresh.state_hash() == runtime.state_hash()
        finally:
            await fresh.stop()


class BrokenEmbedder:
    def embed(self, texts):
        raise RuntimeError("the embedding model is broken")


async def test_an_embedding_that_fails_after_generation_began_ends_the_input_failed_without_memory(nats_url,
                                                                                                  service):
    spy = SubmitSpy(service)
    async with shared_app(nats_url, fresh_spec(), service=spy, embedder=BrokenEmbedder()) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        space, con = await _space(alice)
        status, receipt = await alice.post(f"/conversations/{con}/inputs",
                                           alice.body(text="Hello there.", model=model, max_output_tokens=4))
        assert status == 202, receipt
        done = await _wait(alice, receipt["operation"])
        assert done["execution"] == "failed" and len(spy.prompts) == 1   # it was asked of the engine, then ended
        assert await _memory(alice, space) == []
        assert (await _result(alice, receipt["operation"]))["saved_bytes"] == 0   # no output went out before it
