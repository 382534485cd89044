"""A keyed first attempt refused before it ran (KeyEnd.RELEASED): nothing saved, the key is free again."""

from __future__ import annotations

import hashlib

from aotx.stored import BeginKey, FinishKey, KeyEnd, KeyState, interruptions, queries
from aotx.stored.codec import decode_stored, encode_stored
from aotx.stored.events import KeyFinished

from .helpers import ALICE, Store

D1, D2 = hashlib.sha256(b"body 1").digest(), hashlib.sha256(b"body 2").digest()


def test_a_released_key_reads_absent_and_the_next_request_starts_it_again_with_any_body():
    s = Store()
    s.ok(ALICE, BeginKey("messages", "k", D1))
    s.ok(ALICE, FinishKey("messages", "k", 429, {}, KeyEnd.RELEASED))
    assert queries.key(s.state, ALICE, "messages", "k", D1, s.now, s.limits).state is KeyState.ABSENT
    assert queries.key(s.state, ALICE, "messages", "k", D2, s.now, s.limits).state is KeyState.ABSENT  # no 422
    again = s.ok(ALICE, BeginKey("messages", "k", D2))
    assert again.key.state is KeyState.STARTED and s.state.totals.keys == 1
    assert interruptions(s.state) == [(ALICE, FinishKey("messages", "k", 503, {}, KeyEnd.INTERRUPTED))]


def test_a_released_key_event_round_trips_through_the_codec():
    event = KeyFinished(ALICE, "messages", "k", KeyEnd.RELEASED, 429, b"{}")
    assert decode_stored(encode_stored(event)) == event
