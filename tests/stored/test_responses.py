"""Stored responses in the pure core: decide's refusals, apply's fail-closed checks, reads, the chain."""

from __future__ import annotations

import pytest

from aotx.stored import (AppendResponseEvents, CancelResponse, CreateConversation, CreateResponse, DeleteResponse,
                         FinishResponse, Reason, ResponseEventsAppended, ResponseStatus, StoredApplyError,
                         StoredRefusal, StoredState, apply_stored_into, queries, stored_digest)

from .helpers import ALICE, BOB, T0, Store, call, call_output, cid, iid, message, rid


def create(n: int, *items, **kw) -> CreateResponse:
    return CreateResponse(rid(n), T0, "smollm2", list(items) or [message(100 * n, "hi")], **kw)


def finish(n: int, *output, status=ResponseStatus.COMPLETED) -> FinishResponse:
    return FinishResponse(rid(n), status, list(output), usage={"input_tokens": 3, "output_tokens": 2})


def test_a_response_is_created_streamed_finished_read_and_deleted():
    s = Store()
    s.ok(ALICE, create(1, instructions="be brief", metadata={"k": "v"}, params={"temperature": 0.2}))
    view = s.state and queries.response(s.state, ALICE, rid(1), s.now, s.limits)
    assert (view.status, view.events, view.instructions, view.metadata, view.params) == (
        ResponseStatus.IN_PROGRESS, 0, "be brief", {"k": "v"}, {"temperature": 0.2})
    assert s.ok(ALICE, AppendResponseEvents(rid(1), 0, [b'{"sequence_number":0}', b'{"sequence_number":1}'])).events == 1
    s.ok(ALICE, AppendResponseEvents(rid(1), 2, [b'{"sequence_number":2}']))
    s.ok(ALICE, finish(1, message(7, "hello", "assistant")))
    view = queries.response(s.state, ALICE, rid(1), s.now, s.limits)
    assert (view.status, view.events, view.output, view.usage, view.finished_at) == (
        ResponseStatus.COMPLETED, 3, [message(7, "hello", "assistant")], {"input_tokens": 3, "output_tokens": 2}, T0)
    ev = queries.response_events(s.state, ALICE, rid(1), s.now, s.limits, after=0)
    assert [n for n, _ in ev.events] == [1, 2] and ev.finished and ev.next == 3
    assert s.state.totals.responses == 1 and s.state.totals.bytes > 0
    s.ok(ALICE, DeleteResponse(rid(1)))
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).reason is Reason.UNKNOWN
    assert s.state.totals.responses == 0 and s.state.totals.bytes == 0 and not s.state.books


def test_another_identitys_response_reads_exactly_as_an_unknown_one():
    s, empty = Store(), Store()
    s.ok(BOB, create(1))
    s.ok(BOB, finish(1))
    reads = (lambda st, who: queries.response(st, who, rid(1), T0, s.limits),
             lambda st, who: queries.input_items(st, who, rid(1), T0, s.limits),
             lambda st, who: queries.response_events(st, who, rid(1), T0, s.limits),
             lambda st, who: queries.chain(st, who, rid(1), T0, s.limits))
    for read in reads:
        foreign = read(s.state, ALICE)
        assert isinstance(foreign, StoredRefusal) and foreign.reason is Reason.UNKNOWN
        assert foreign == read(empty.state, ALICE) == read(empty.state, BOB)   # the same answer, byte for byte
    for cmd in (DeleteResponse(rid(1)), AppendResponseEvents(rid(1), 0, [b"x"]), CancelResponse(rid(1)),
                finish(1), create(2, previous_response_id=rid(1))):
        out = s.do(ALICE, cmd)
        assert isinstance(out, StoredRefusal) and out.reason is Reason.UNKNOWN, (cmd, out)
    assert queries.response(s.state, BOB, rid(1), s.now, s.limits).status is ResponseStatus.COMPLETED


def test_what_decide_refuses_changes_nothing():
    s = Store()
    s.ok(ALICE, create(1))
    s.ok(ALICE, CreateConversation(cid(1), T0))
    before = stored_digest(s.state), s.state.totals
    cases = [
        (create(1), Reason.EXISTS),
        (create(2, previous_response_id=rid(1)), Reason.PENDING),          # not finished yet
        (create(2, previous_response_id=rid(9)), Reason.UNKNOWN),
        (create(2, conversation=cid(9)), Reason.UNKNOWN),
        (create(2, previous_response_id=rid(1), conversation=cid(1)), Reason.INVALID),
        (CreateResponse("resp_1", T0, "m", [message(1, "x")]), Reason.INVALID),
        (CreateResponse(rid(2), T0, "m", [{"type": "message"}]), Reason.INVALID),         # no item id
        (CreateResponse(rid(2), T0, "m", [message(1, "x"), message(1, "y")]), Reason.EXISTS),
        (create(2, metadata=["not", "an", "object"]), Reason.INVALID),
        (create(2, params={"t": float("nan")}), Reason.INVALID),
        (create(2, metadata={"big": "x" * (10 << 20)}), Reason.TOO_LARGE),
        (AppendResponseEvents(rid(1), 1, [b"e"]), Reason.OUT_OF_ORDER),
        (AppendResponseEvents(rid(1), 0, ["not bytes"]), Reason.INVALID),
        (FinishResponse(rid(1), ResponseStatus.IN_PROGRESS), Reason.INVALID),
        (FinishResponse(rid(1), ResponseStatus.COMPLETED, [message(100, "clash")]), Reason.EXISTS),
    ]
    for cmd, reason in cases:
        out = s.do(ALICE, cmd)
        assert isinstance(out, StoredRefusal) and out.reason is reason, (cmd, out)
    assert (stored_digest(s.state), s.state.totals) == before
    s.ok(ALICE, finish(1))
    for cmd in (AppendResponseEvents(rid(1), 0, [b"e"]), finish(1), CancelResponse(rid(1))):
        assert s.do(ALICE, cmd).reason is Reason.FINISHED


def test_apply_fails_closed_on_an_event_that_contradicts_the_state():
    s = Store()
    s.ok(ALICE, create(1))
    s.ok(ALICE, AppendResponseEvents(rid(1), 0, [b"a"]))
    before = stored_digest(s.state), s.state.totals, s.state.applied
    for bad in (ResponseEventsAppended(ALICE, rid(1), 0, (b"again",)),
                ResponseEventsAppended(ALICE, rid(2), 0, (b"x",)),
                ResponseEventsAppended(BOB, rid(1), 1, (b"x",))):
        with pytest.raises(StoredApplyError):
            apply_stored_into(s.state, bad)
    assert (stored_digest(s.state), s.state.totals, s.state.applied) == before


def test_the_chain_carries_every_input_and_output_item_with_tool_calls_and_not_the_instructions():
    s = Store()
    s.ok(ALICE, create(1, message(1, "weather in Paris?"), instructions="use tools", tools=[{"type": "function"}]))
    s.ok(ALICE, finish(1, call(2)))
    s.ok(ALICE, create(2, call_output(2), previous_response_id=rid(1), instructions="other"))
    s.ok(ALICE, finish(2, message(3, "It is sunny.", "assistant")))
    chain = queries.chain(s.state, ALICE, rid(2), s.now, s.limits)
    assert chain == [message(1, "weather in Paris?"), call(2), call_output(2), message(3, "It is sunny.", "assistant")]
    assert all("instructions" not in item for item in chain)
    s.ok(ALICE, DeleteResponse(rid(1)))      # a link of the chain is gone: the chain is unknown, naming it
    gone = queries.chain(s.state, ALICE, rid(2), s.now, s.limits)
    assert gone.reason is Reason.UNKNOWN and rid(1) in gone.message and gone.param == "previous_response_id"


def test_input_items_page_as_openai_does():
    s = Store()
    items = [message(k, f"m{k}") for k in range(1, 6)]
    s.ok(ALICE, create(1, *items))
    page = queries.input_items(s.state, ALICE, rid(1), s.now, s.limits)           # desc by default
    assert [i["id"] for i in page.data] == [iid(k) for k in (5, 4, 3, 2, 1)] and not page.has_more
    page = queries.input_items(s.state, ALICE, rid(1), s.now, s.limits, order="asc", limit=2)
    assert (page.first_id, page.last_id, page.has_more) == (iid(1), iid(2), True)
    page = queries.input_items(s.state, ALICE, rid(1), s.now, s.limits, order="asc", limit=2, after=page.last_id)
    assert [i["id"] for i in page.data] == [iid(3), iid(4)] and page.has_more
    page = queries.input_items(s.state, ALICE, rid(1), s.now, s.limits, order="asc", after=iid(5))
    assert (page.data, page.first_id, page.has_more) == ([], None, False)
    for kw in ({"after": iid(9)}, {"limit": 0}, {"limit": 101}, {"order": "up"}):
        out = queries.input_items(s.state, ALICE, rid(1), s.now, s.limits, **kw)
        assert out.reason is Reason.BAD_CURSOR and out.param in kw, kw


def test_a_background_response_is_queued_until_its_first_events_and_can_be_cancelled():
    s = Store()
    s.ok(ALICE, create(1, background=True))
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).status is ResponseStatus.QUEUED
    s.ok(ALICE, AppendResponseEvents(rid(1), 0, [b"{}"]))
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).status is ResponseStatus.IN_PROGRESS
    assert s.ok(ALICE, CancelResponse(rid(1))).events == 1
    assert s.ok(ALICE, CancelResponse(rid(1))).events == 0          # asked once is enough
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).cancel_requested
    s.ok(ALICE, finish(1, status=ResponseStatus.CANCELLED))
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).status is ResponseStatus.CANCELLED


def test_a_fork_decides_on_its_own_and_leaves_the_state_it_came_from_alone():
    s = Store()
    s.ok(ALICE, create(1))
    before = stored_digest(s.state)
    fork = Store(state=s.state.fork())
    fork.ok(ALICE, AppendResponseEvents(rid(1), 0, [b"a"]))
    fork.ok(ALICE, create(2))
    fork.ok(BOB, create(3))
    assert stored_digest(s.state) == before and rid(2) not in s.state.book(ALICE).responses
    assert isinstance(StoredState().fork(), StoredState)


def test_decide_writes_its_json_with_one_encoder_built_once(monkeypatch):
    """The JSON values of a create and a finish (items, params, usage, …) are written by one compact encoder
    built at import (aotx.strict_json.compact), not by a json.JSONEncoder built per value (json.dumps with
    arguments builds one each call: ~3 µs of the event loop's time per value, ~5 values a command); the
    bytes are strict_json.dumps(value, separators=(",", ":"))'s."""
    import json

    from aotx import strict_json
    from aotx.stored import FinishResponse, ResponseStatus, StoredLimits, apply_stored_into, decide

    built = []
    real_init = json.JSONEncoder.__init__
    monkeypatch.setattr(json.JSONEncoder, "__init__", lambda self, *a, **kw: built.append(1) or real_init(self, *a, **kw))
    s = Store()
    params = {"temperature": 0.5, "text": {"format": {"type": "text"}}, "user": "ü"}
    created = decide(s.state, ALICE, CreateResponse(rid(1), T0, "m", [message(1, "héllo")], params=params), T0,
                     StoredLimits())
    (event,) = created.events
    apply_stored_into(s.state, event)
    finished = decide(s.state, ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED, [message(2, "ok")],
                                                     usage={"output_tokens": 3}), T0, StoredLimits())
    assert built == []
    assert event.params == strict_json.dumps(params, separators=(",", ":")).encode()
    assert event.input[0] == strict_json.dumps(message(1, "héllo"), separators=(",", ":")).encode()
    assert finished.events[0].usage == b'{"output_tokens":3}' and finished.events[0].error == b"null"
