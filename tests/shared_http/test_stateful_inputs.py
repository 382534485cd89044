"""Hypothesis stateful test of shared inputs, results, memory and membership over HTTP (Quart test client),
against a real nats-server and the real model: the journal-core rule model (scenarios.Model) extended with
inputs, cancellations, retirements, publications, membership changes during open SSE streams, and runtime
restarts on the same journal.

Invariants, checked by the scenarios runner on every answer:
* every status is the one the rules give (or one of the set they allow where a cancellation or a
  retirement races an input's end), with rights = current grants ∩ membership (dave holds no
  shared_manage grant, whatever his member rows say);
* results are byte-identical whenever read: by offset and limit, through the operation SSE stream
  resumed by Last-Event-ID, across restarts; an ended result never changes; an input ends `cancelled`
  only after an admitted cancellation and `interrupted` only across a restart;
* no memory input is applied twice: per input operation at most one retained text row, and exactly one
  once it completed; a space lists only its own memory (or instance-scoped memory);
* a member removed while their conversation event stream is open sees it end with an error event; their
  new reads answer 404.
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule, run_state_machine_as_test

from scenarios import parse_sse
from scenarios.client import BASE
from scenarios.model import MEMBER, READ
from tests.scenarios.conftest import service  # noqa: F401 — the module's fixture
from tests.scenarios.stack import GRANTS, fresh_spec, quart_stack, runner_for
from tests.waiting import open_stream

from .core_rules import index, journal_core_rules

ACTORS = ("alice", "bob", "carol", "dave")
SEEN: Counter[str] = Counter()   # over all examples: the run must reach the interesting answers

actors = st.sampled_from(ACTORS)
back = st.integers(1, 4)
words = st.sampled_from(("river", "copper", "lantern", "harbour", "orchard", "comet", "violin", "granite"))
tokens = st.integers(2, 8)


class SharedInputsMachine(journal_core_rules(actors, back)):
    nats_url = ""
    service = None
    seen = SEEN

    def __init__(self) -> None:
        super().__init__()
        self.spec = fresh_spec("HPIN")
        self.stack = None
        self.steps = 0              # rules run since the last restart

    def _open(self) -> None:
        self.stack = quart_stack(self.nats_url, self.service, self.spec)
        self.runtime, transport = self.run(self.stack.__aenter__())
        if self.runner is None:
            self.runner = runner_for(transport, list(ACTORS), max_output_tokens=6)
        else:  # the client keeps its ledger and counters across the restart
            for party in self.runner.parties.values():
                party.transport = transport

    def _close(self) -> None:
        if self.stack is not None:
            self.run(self.stack.__aexit__(None, None, None))
            self.stack = None

    def step(self, **step) -> str:
        self.steps += 1
        return self.run(self.runner.run_step(step))

    @initialize()
    def boot(self) -> None:
        """Everyone registered; alice's room with a conversation, bob writes there, carol reads; alice's private
        notes (somewhere to publish the room's memory).

        Then the rows that only one rule reaches, once each, so that every run reaches them whatever the
        random rules draw (hypothesis draws many examples of a few rules): bob's input ends and alice
        publishes its memory into her notes; bob cancels a long input at once (201: it cannot have ended
        yet); carol's open conversation stream ends when she is removed, and her read row comes back; carol
        retires, and her retired receipts read 410."""
        self._open()
        self.run(self.runner.sync())
        assert self.runner.model.execution and self.runner.model.memory_enabled
        for name in ACTORS:
            self.step(actor=name, do="register", expect=201)
        self.step(actor="alice", do="space", scope="room", expect=201)
        self.step(actor="alice", do="conversation", space=0, expect=201)
        self.step(actor="alice", do="member", space=0, target="bob", permissions=["read", "write"], expect=201)
        self.step(actor="alice", do="member", space=0, target="carol", permissions=["read"], expect=201)
        self.step(actor="bob", do="input", conversation=0, text="Remember the word meadow.", max_output_tokens=4,
                  expect=202)
        self.step(actor="alice", do="space", scope="private", expect=201)
        self.step(actor="bob", do="wait", input=-1, execution=["completed"])
        self.step(actor="alice", do="publish", memory=0, space=1, expect=201)
        self.step(actor="bob", do="input", conversation=0, text="Tell me a long story about a harbour.",
                  max_output_tokens=48, expect=202)
        self.step(actor="bob", do="cancel", back=1)
        m = self.runner.model
        room, con = list(m.spaces)[0], list(m.conversations)[0]
        self._remove_during_stream(room, "alice", "carol", con)
        self.step(actor="alice", do="member", space=0, target="carol", permissions=["read"], expect=201)
        self.step(actor="carol", do="retire", expect=201)
        for op in sorted(m.parties["carol"].retired_ops):
            self.run(self.runner.check_read("carol", f"/operations/{op}", 410))
        self.steps = 0

    # ---- inputs and their results ----------------------------------------------------------------
    @rule(actor=actors, con=index, word=words, n=tokens)
    def post_input(self, actor, con, word, n):
        self.step(actor=actor, do="input", conversation=con, text=f"Remember the word {word}.", max_output_tokens=n)

    @rule(actor=actors, con=index, word=words, n=tokens, reader=actors, resume=st.integers(0, 6))
    def post_input_and_follow(self, actor, con, word, n, reader, resume):
        """An input, then another principal follows its events (resumed) and reads it by offset."""
        if self.step(actor=actor, do="input", conversation=con, text=f"Tell me about {word}.",
                     max_output_tokens=n) == "input":
            self.step(actor=reader, do="read_result", input=-1, via="sse", resume=resume)
            self.step(actor=actor, do="read_result", input=-1, limit=2)

    @rule(actor=actors, back=back)
    def cancel(self, actor, back):
        self.step(actor=actor, do="cancel", back=back)

    @rule(actor=actors, con=index, word=words)
    def post_and_cancel(self, actor, con, word):
        """An input cancelled at once: the cancellation races its end (201 or 409), and it ends cancelled
        only when the cancellation was admitted."""
        if self.step(actor=actor, do="input", conversation=con, text=f"Write a poem about {word}.",
                     max_output_tokens=8) == "input":
            self.step(actor=actor, do="cancel", back=1)

    @rule(pick=index)
    def publish_where_managed(self, pick):
        """Someone publishes a text memory they can read into another space they own or hold a manage row in
        (201, or 403 for dave, whose grants hold no shared_manage)."""
        m = self.runner.model
        spaces = list(m.spaces)
        memory = list(m.memory)
        cases = [(actor, memory.index(obj), spaces.index(sid)) for actor in ACTORS for obj, mem in m.memory.items()
                 if "read" in m.rights(actor, mem.owner) for sid, s in m.spaces.items()
                 if sid != mem.owner and (s.owner == actor or "manage" in s.members.get(actor, ()))]
        if cases:
            actor, obj, sid = cases[pick % len(cases)]
            self.step(actor=actor, do="publish", memory=obj, space=sid)

    @rule(actor=actors, op=index, limit=st.sampled_from((None, 1, 3, 7)))
    def read_result_by_offset(self, actor, op, limit):
        self.step(actor=actor, do="read_result", input=op, limit=limit)

    @rule(actor=actors, op=index, resume=st.one_of(st.none(), st.integers(0, 12)))
    def read_result_by_sse(self, actor, op, resume):
        self.step(actor=actor, do="read_result", input=op, via="sse", resume=resume)

    @rule(actor=actors, op=index)
    def read_receipt(self, actor, op):
        self.step(actor=actor, do="read_result", input=op, via="receipt")

    @precondition(lambda self: self.runner is not None and self.runner.model.inputs)
    @rule(actor=actors, op=index)
    def wait_for_input(self, actor, op):
        self.step(actor=actor, do="wait", input=op)

    # ---- journal core (create_space, create_conversation, set_member, exact_retry, retire: journal_core_rules),
    # membership, memory ---------------------------------------------------------------------------
    @rule(actor=actors, space=index)
    def read_memory(self, actor, space):
        self.step(actor=actor, do="read_memory", space=space)

    @rule(actor=actors, memory=index, space=index)
    def publish(self, actor, memory, space):
        self.step(actor=actor, do="publish", memory=memory, space=space)

    @rule(actor=actors, memory=index)
    def read_memory_object(self, actor, memory):
        self.step(actor=actor, do="read_memory", memory=memory)

    @rule(pick=index)
    def remove_member_during_stream(self, pick):
        """A reader's conversation event stream is open when the owner removes them: the stream ends with
        an error event, and the reader's new reads of that conversation and its results are 404."""
        m = self.runner.model
        cases = [(sid, s.owner, name) for sid, s in m.spaces.items() if "manage" in m.rights(s.owner, sid)
                 for name in ACTORS if name != s.owner and READ in m.rights(name, sid)]
        cases = [(sid, owner, name, con) for sid, owner, name in cases
                 for con, space in m.conversations.items() if space == sid]
        if cases:
            self._remove_during_stream(*cases[pick % len(cases)])

    def _remove_during_stream(self, sid: str, owner: str, reader: str, con: str) -> None:
        """`owner` removes `reader` from `sid` while the reader's stream of conversation `con` is open."""
        m, runner = self.runner.model, self.runner

        async def go():
            party = runner.parties[reader]
            async with open_stream(party.transport.client, f"{BASE}/conversations/{con}/events?stream=true",
                                   {"Authorization": f"Bearer {party.token}"}) as stream:
                status = await stream.started(f"{reader}'s conversation stream to open")
                assert status == 200, (status, stream.text)   # open: now the owner removes the reader
                removed = await runner.mutate(owner, MEMBER, {"participant": m.parties[reader].pid,
                                                              "permissions": []}, space=sid)
                assert removed.status == 201, removed
                return await stream.finish()

        events = parse_sse(self.run(go()))
        assert events and events[-1]["event"] == "error", events[-3:]
        assert events[-1]["data"]["error"]["type"] == "not_found"
        cursors = [int(e["data"]["cursor"]) for e in events if e["event"] == "input"]
        assert cursors == sorted(set(cursors)), cursors
        for e in events:
            if e["event"] == "input":   # foreign authors' sequences are null
                author = m.by_pid(e["data"]["author"])
                assert (e["data"]["sequence"] is None) == (author != reader), e
        self.run(runner.check_read(reader, f"/conversations/{con}/events", 404))
        for i in [i for i in m.inputs.values() if i.space == sid and i.actor != reader][-2:]:
            self.run(runner.read_result(reader, i.op))          # the model says 404 now
        runner.stats["streams_ended_by_removal"] += 1

    @precondition(lambda self: self.steps >= 5)
    @rule()
    def restart(self):
        old = self.runtime
        self._close()
        live = old.state_hash()   # as it stopped: an input still unfinished then is interrupted by the boot
        unfinished = any(r is not None and not r.status.terminal for r in old.state.executions)
        self._open()
        self.runner.restarted()
        self.steps = 0
        if not unfinished:
            assert self.runtime.state_hash() == live
        else:
            self.runner.stats["restarts_with_unfinished_inputs"] += 1
        self.run(self.runner.verify())
        m = self.runner.model
        for sid in list(m.spaces)[-3:]:      # memory listed again: no input retained twice, none lost
            readers = [n for n in ACTORS if m.read_memory_status(n, sid) == 200]
            if readers:
                self.run(self.runner.read_memory(readers[0], sid, details=1))
        self.restarts += 1

    @invariant()
    def runtime_healthy(self):
        if self.stack is not None:
            assert self.runtime.failed is None and not self.runtime.hold.active

    @invariant()
    def latest_input_readable_exactly_by_its_readers(self):
        """Each principal reads the newest input's receipt exactly when grants ∩ membership allow it."""
        if self.stack is None or self.runner is None or not self.runner.model.inputs:
            return
        op = list(self.runner.model.inputs)[-1]
        for name in ACTORS:
            self.run(self.runner.read_receipt(name, op))


@pytest.fixture(scope="module")
def machine(nats_url, service):  # noqa: F811 — service: imported above
    SharedInputsMachine.nats_url, SharedInputsMachine.service = nats_url, service
    return SharedInputsMachine


def test_shared_inputs_against_the_rule_model(machine):
    assert GRANTS["dave"] == {"shared_read", "shared_write"}
    # examples: 1/5 of the profile's (20 in ci, 40 in dev); each one boots a runtime and runs the real model
    run_state_machine_as_test(machine, settings=settings(
        max_examples=settings.default.max_examples // 5, stateful_step_count=30, deadline=None, database=None,
        phases=(Phase.explicit, Phase.generate),   # no shrinking: timing makes replays of a real model differ
        suppress_health_check=list(HealthCheck)))
    print(dict(sorted(SEEN.items())))
    for what in ("status_202", "status_201", "status_403", "status_404", "read_200", "read_404", "read_410",
                 "input_202", "cancel_201", "publish_201", "retire_201", "result_spans_checked",
                 "event_streams_checked", "memory_rows_checked", "memory_objects_checked", "streams_ended_by_removal",
                 "restarts"):
        assert SEEN[what] > 0, (what, SEEN)
