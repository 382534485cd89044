"""Appends to a stored record (a response's events, a key's chunks, a conversation's items) cost what they
append, not what is already there: a long run's events are not copied on every append (aotx.stored.grown).
Apply stays pure: a fork that appends is never seen by the state it came from, whatever the order of forks,
appends and divergent appends (hypothesis, against a model of plain tuples)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aotx.stored import (
    AppendKeyAnswer,
    AppendResponseEvents,
    BeginKey,
    CreateResponse,
    StoredState,
    apply_stored_into,
    decide,
    stored_digest,
)
from aotx.stored.events import ResponseEventsAppended
from aotx.stored.grown import Grown

from .helpers import ALICE, T0, Store, rid


def _store_with_response() -> Store:
    store = Store()
    store.ok(ALICE, CreateResponse(rid(1), T0, "m", [], background=True))
    return store


def test_a_long_run_of_appends_through_forks_copies_no_earlier_event():
    store = _store_with_response()
    before = Grown.copied
    for n in range(3000):
        fork = store.state.fork()                           # a round decides on a fork, then the log's copy lands
        decision = decide(fork, ALICE, AppendResponseEvents(rid(1), n, [b"e%d" % n]), T0, store.limits)
        for event in decision.events:
            apply_stored_into(fork, event)
            landed = ResponseEventsAppended(event.identity, event.response, event.first,
                                            tuple(bytes(b) for b in event.events))   # decoded: equal, not the same
            apply_stored_into(store.state, landed)
    events = store.state.book(ALICE).responses[rid(1)].events
    assert isinstance(events, Grown) and Grown.copied == before
    assert tuple(events) == tuple(b"e%d" % n for n in range(3000)) and len(events) == 3000
    assert events[-1] == b"e2999" and events[2990:] == tuple(b"e%d" % n for n in range(2990, 3000))


def test_key_chunks_grow_without_copies_and_hash_as_before():
    store = Store()
    store.ok(ALICE, BeginKey("completions", "k", b"\0" * 32))
    before = Grown.copied
    for n in range(500):
        store.ok(ALICE, AppendKeyAnswer("completions", "k", n, [b"c%d" % n]))
    record = store.state.book(ALICE).keys[("completions", "k")]
    assert Grown.copied == before and record.chunks == tuple(b"c%d" % n for n in range(500))
    plain = StoredState()
    for event in store.journal:                           # the same events applied to a plain copy: same digest
        apply_stored_into(plain, event)
    assert stored_digest(plain) == stored_digest(store.state)


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3)), max_size=60))
def test_forks_and_appends_in_any_order_see_only_their_own_events(program):
    """Each step: pick a live state and append `k` new events to it, or (k = 0) fork it. A fork lives while
    the state it came from is unchanged (as a round's fork of the acknowledged state): appending to a state
    ends the forks made of it. Every live state shows exactly its own events."""
    store = _store_with_response()
    states, model, parent, live = [store.state], [()], [-1], [0]
    serial = 0
    for pick, k in program:
        at = live[pick % len(live)]
        if k == 0:
            states.append(states[at].fork())
            model.append(model[at])
            parent.append(at)
            live.append(len(states) - 1)
            continue
        ended = {at}
        for i in range(len(states)):       # descendants of `at` (parents come before their forks)
            if parent[i] in ended:
                ended.add(i)
        live = [i for i in live if i == at or i not in ended]
        new = tuple(b"x%d" % (serial + i) for i in range(k))
        serial += k
        apply_stored_into(states[at], ResponseEventsAppended(ALICE, rid(1), len(model[at]), new))
        model[at] = model[at] + new
        for i in live:
            assert tuple(states[i].book(ALICE).responses[rid(1)].events) == model[i]
            assert states[i].book(ALICE).responses[rid(1)].events == model[i]
