"""Conversations, idempotency keys, limits and retention in the pure core; recovery; the export round trip."""

from __future__ import annotations

import hashlib

from aotx.stored import (AddConversationItems, AppendKeyAnswer, AppendResponseEvents, BeginKey, CreateConversation,
                         CreateResponse, DeleteConversation, DeleteConversationItem, DeleteResponse, Expire, FinishKey, FinishResponse,
                         KeyEnd, KeyState, Reason, ResponseStatus, StoredLimits, StoredRefusal, UpdateConversation,
                         export_stored, import_stored, interruptions, queries, stored_digest)

from .helpers import ALICE, BOB, T0, Store, cid, iid, message, rid

D1, D2 = hashlib.sha256(b"body 1").digest(), hashlib.sha256(b"body 2").digest()


def test_a_conversation_is_created_listed_edited_and_deleted():
    s = Store()
    s.ok(ALICE, CreateConversation(cid(1), T0, {"topic": "demo"}, [message(1, "a"), message(2, "b")]))
    s.ok(ALICE, AddConversationItems(cid(1), [message(3, "c")]))
    page = queries.conversation_items(s.state, ALICE, cid(1), order="asc")
    assert [i["id"] for i in page.data] == [iid(1), iid(2), iid(3)]
    assert queries.conversation_item(s.state, ALICE, cid(1), iid(2)) == message(2, "b")
    s.ok(ALICE, DeleteConversationItem(cid(1), iid(2)))
    assert queries.conversation_item(s.state, ALICE, cid(1), iid(2)).reason is Reason.UNKNOWN
    s.ok(ALICE, UpdateConversation(cid(1), {"topic": "changed"}))
    view = queries.conversation(s.state, ALICE, cid(1))
    assert (view.metadata, view.items, view.created_at) == ({"topic": "changed"}, 2, T0)
    assert queries.conversation(s.state, BOB, cid(1)) == queries.conversation(Store().state, BOB, cid(1))
    for cmd, reason in [(CreateConversation(cid(1), T0), Reason.EXISTS),
                        (AddConversationItems(cid(1), [message(1, "again")]), Reason.EXISTS),
                        (DeleteConversationItem(cid(1), iid(2)), Reason.UNKNOWN),
                        (AddConversationItems(cid(2), [message(9, "x")]), Reason.UNKNOWN),
                        (UpdateConversation(cid(1), "not an object"), Reason.INVALID)]:
        assert s.do(ALICE, cmd).reason is reason, cmd
    assert s.do(BOB, DeleteConversation(cid(1))).reason is Reason.UNKNOWN
    s.ok(ALICE, DeleteConversation(cid(1)))
    assert s.state.totals.conversations == s.state.totals.items == s.state.totals.bytes == 0


def test_a_response_with_a_conversation_adds_its_items_when_it_completes_not_when_it_fails():
    s = Store()
    s.ok(ALICE, CreateConversation(cid(1), T0, items=[message(1, "earlier")]))
    s.ok(ALICE, CreateResponse(rid(1), T0, "m", [message(2, "q")], conversation=cid(1)))
    s.ok(ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED, [message(3, "a", "assistant")]))
    s.ok(ALICE, CreateResponse(rid(2), T0, "m", [message(4, "q2")], conversation=cid(1)))
    s.ok(ALICE, FinishResponse(rid(2), ResponseStatus.FAILED, error={"code": "server_error", "message": "x"}))
    assert queries.all_conversation_items(s.state, ALICE, cid(1)) == [
        message(1, "earlier"), message(2, "q"), message(3, "a", "assistant")]
    assert s.state.totals.items == 3


def test_an_idempotency_key_starts_follows_replays_and_refuses_another_body():
    s = Store()
    first = s.ok(ALICE, BeginKey("chat.completions", "k-1", D1))
    assert first.key.state is KeyState.STARTED and first.events == 1
    again = s.ok(ALICE, BeginKey("chat.completions", "k-1", D1))
    assert again.key.state is KeyState.RUNNING and again.events == 0
    other = s.do(ALICE, BeginKey("chat.completions", "k-1", D2))
    assert isinstance(other, StoredRefusal) and other.reason is Reason.MISMATCH and other.status == 422
    assert s.ok(BOB, BeginKey("chat.completions", "k-1", D2)).key.state is KeyState.STARTED   # keys are per identity
    assert s.ok(ALICE, BeginKey("messages", "k-1", D2)).key.state is KeyState.STARTED         # and per surface
    s.ok(ALICE, AppendKeyAnswer("chat.completions", "k-1", 0, [b"data: 1", b"data: 2"]))
    assert s.do(ALICE, AppendKeyAnswer("chat.completions", "k-1", 1, [b"x"])).reason is Reason.OUT_OF_ORDER
    s.ok(ALICE, FinishKey("chat.completions", "k-1", 200, {"content-type": "text/event-stream"}))
    done = s.ok(ALICE, BeginKey("chat.completions", "k-1", D1)).key
    assert (done.state, done.chunks, done.status, done.end, done.headers) == (
        KeyState.FINISHED, (b"data: 1", b"data: 2"), 200, KeyEnd.COMPLETE, b'{"content-type":"text/event-stream"}')
    assert s.do(ALICE, FinishKey("chat.completions", "k-1", 200)).reason is Reason.FINISHED
    assert queries.key(s.state, ALICE, "chat.completions", "k-1", D2, s.now, s.limits).state is KeyState.MISMATCH
    assert queries.key(s.state, ALICE, "completions", "k-1", D1, s.now, s.limits).state is KeyState.ABSENT
    for bad in (BeginKey("nope", "k", D1), BeginKey("messages", "", D1), BeginKey("messages", "k\n", D1),
                BeginKey("messages", "k", b"short"), BeginKey("messages", "k", D1, bound="resp_x")):
        assert s.do(ALICE, bad).reason is Reason.INVALID, bad


def test_a_finished_key_expires_after_its_ttl_and_then_starts_afresh():
    s = Store(limits=StoredLimits(idempotency_ttl=60))
    s.ok(ALICE, BeginKey("responses", "k", D1, bound=rid(1)))
    s.ok(ALICE, FinishKey("responses", "k", 200))
    s.now += 59
    assert queries.key(s.state, ALICE, "responses", "k", D1, s.now, s.limits).state is KeyState.FINISHED
    s.now += 1
    assert queries.key(s.state, ALICE, "responses", "k", D2, s.now, s.limits).state is KeyState.ABSENT
    fresh = s.ok(ALICE, BeginKey("responses", "k", D2))      # the expiry and the new start, in one command
    assert (fresh.events, fresh.key.state, s.state.totals.keys) == (2, KeyState.STARTED, 1)


def test_a_running_key_never_expires():
    s = Store(limits=StoredLimits(idempotency_ttl=60))
    s.ok(ALICE, BeginKey("responses", "k", D1))
    s.now += 3600
    assert s.ok(ALICE, BeginKey("responses", "k", D1)).key.state is KeyState.RUNNING
    assert s.ok(ALICE, Expire()).events == 0


def test_limits_refuse_with_the_table_they_name_until_room_is_freed():
    s = Store(limits=StoredLimits(responses=2, keys=1, conversations=1, items_per_conversation=2, bytes=4000))
    s.ok(ALICE, CreateResponse(rid(1), T0, "m", [message(1, "a")]))
    s.ok(BOB, CreateResponse(rid(2), T0, "m", [message(2, "b")]))
    full = s.do(ALICE, CreateResponse(rid(3), T0, "m", [message(3, "c")]))
    assert full.reason is Reason.FULL and "responses table is full (2 rows)" in full.message
    s.ok(ALICE, BeginKey("messages", "a", D1))
    assert "keys table is full" in s.do(BOB, BeginKey("messages", "b", D1)).message
    assert s.do(ALICE, CreateConversation(cid(1), T0, items=[message(k, "x") for k in range(3)])).reason is Reason.FULL
    s.ok(ALICE, CreateConversation(cid(1), T0, items=[message(4, "x")]))
    assert s.do(ALICE, AddConversationItems(cid(1), [message(5, "y"), message(6, "z")])).reason is Reason.FULL
    big = s.do(ALICE, AppendResponseEvents(rid(1), 0, [b"e" * 4000]))
    assert big.reason is Reason.FULL and "byte budget" in big.message
    s.ok(ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED, [message(7, "o" * 3000, "assistant")]))  # never refused
    s.ok(ALICE, DeleteResponse(rid(1)))
    s.ok(ALICE, CreateResponse(rid(3), T0, "m", [message(3, "c")]))


def test_finished_responses_expire_after_the_response_ttl_and_the_sweep_frees_their_room():
    s = Store(limits=StoredLimits(response_ttl=100))
    s.ok(ALICE, CreateResponse(rid(1), T0, "m", [message(1, "a")]))
    s.ok(ALICE, FinishResponse(rid(1), ResponseStatus.COMPLETED))
    s.ok(ALICE, CreateResponse(rid(2), T0, "m", [message(2, "b")]))        # still running: kept
    s.now = T0 + 100
    assert queries.response(s.state, ALICE, rid(1), s.now, s.limits).reason is Reason.UNKNOWN
    assert s.do(ALICE, CreateResponse(rid(3), T0, "m", [message(3, "c")], previous_response_id=rid(1))).reason \
        is Reason.UNKNOWN
    assert s.ok(ALICE, Expire()).events == 1
    assert list(s.state.book(ALICE).responses) == [rid(2)] and s.state.totals.responses == 1
    assert s.ok(ALICE, Expire()).events == 0


def test_recovery_finishes_every_unfinished_response_failed_and_every_running_key_interrupted():
    s = Store()
    s.ok(ALICE, CreateResponse(rid(1), T0, "m", [message(1, "a")]))
    s.ok(ALICE, AppendResponseEvents(rid(1), 0, [b"e0"]))
    s.ok(ALICE, CreateResponse(rid(2), T0, "m", [message(2, "b")]))
    s.ok(ALICE, FinishResponse(rid(2), ResponseStatus.COMPLETED))
    s.ok(BOB, BeginKey("messages", "k", D1))
    todo = interruptions(s.state)
    assert [(who, type(c).__name__) for who, c in todo] == [(ALICE, "FinishResponse"), (BOB, "FinishKey")]
    for who, cmd in todo:
        s.ok(who, cmd)
    view = queries.response(s.state, ALICE, rid(1), s.now, s.limits)
    assert view.status is ResponseStatus.FAILED and "interrupted by a restart" in view.error["message"]
    assert queries.response_events(s.state, ALICE, rid(1), s.now, s.limits).events == ((0, b"e0"),)   # kept
    key = queries.key(s.state, BOB, "messages", "k", D1, s.now, s.limits)
    assert (key.state, key.end) == (KeyState.FINISHED, KeyEnd.INTERRUPTED)
    assert interruptions(s.state) == []


def test_export_and_import_give_the_same_state_and_digest():
    s = Store()
    s.ok(ALICE, CreateConversation(cid(1), T0, {"a": "b"}, [message(1, "x")]))
    s.ok(ALICE, CreateResponse(rid(1), T0, "m", [message(2, "q")], conversation=cid(1), background=True))
    s.ok(ALICE, AppendResponseEvents(rid(1), 0, [b"e0", b"e1"]))
    s.ok(ALICE, FinishResponse(rid(1), ResponseStatus.INCOMPLETE, [message(3, "a", "assistant")],
                               incomplete_details={"reason": "max_output_tokens"}))
    s.ok(BOB, BeginKey("completions", "k", D1))
    s.ok(BOB, AppendKeyAnswer("completions", "k", 0, [b"{}"]))
    s.ok(BOB, CreateResponse(rid(2), T0, "m", [message(4, "q")]))
    back = import_stored(export_stored(s.state))
    assert export_stored(back) == export_stored(s.state) and stored_digest(back) == stored_digest(s.state)
    assert back.totals == s.state.totals and back.applied == s.state.applied
    assert {k: v.size for k, v in back.book(ALICE).responses.items()} == \
        {k: v.size for k, v in s.state.book(ALICE).responses.items()}
