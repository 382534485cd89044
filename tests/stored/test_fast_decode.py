"""The replay path's stored decode (aotx.stored.codec.stored_from_body): a per-kind fast path that must
agree with the registry's generic decoder on every body — the same event for what it accepts, the same
StoredCodecError (same message) for what it refuses — and that serves every well-formed body itself."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aotx.journal.registry import REGISTRY
from aotx.journal.transfer import TransferKind
from aotx.stored import STORED, StoredCodecError, stored_body, stored_from_body
from tests.stored.test_golden_events import GOLDEN

BODIES = [stored_body(event) for event, _ in GOLDEN]


def _registry(body):
    try:
        return REGISTRY.decode_body(body, STORED, TransferKind.STORED)
    except StoredCodecError as exc:
        return ("refused", str(exc))


def _fast(body):
    try:
        return stored_from_body(body)
    except StoredCodecError as exc:
        return ("refused", str(exc))


def test_every_well_formed_body_takes_the_fast_path(monkeypatch):
    def generic(*args, **kwargs):
        raise AssertionError("went through REGISTRY.decode_body")
    monkeypatch.setattr(REGISTRY, "decode_body", generic)
    for (event, _), body in zip(GOLDEN, BODIES):
        decoded = stored_from_body(body)
        assert decoded == event and type(decoded) is type(event)
        assert all(type(a) is type(b) for a, b in zip(vars(decoded).values(), vars(event).values()))


WIRE = st.recursive(st.none() | st.booleans() | st.integers(-2, 2**64 + 1) | st.floats(allow_nan=False)
                    | st.text(max_size=8) | st.binary(max_size=8)
                    | st.sampled_from(["alice", "resp_" + "a" * 24, "msg_" + "b" * 24, "", "\x00"]),
                    lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@given(st.sampled_from(range(len(BODIES))), st.data())
def test_the_fast_path_agrees_with_the_registry_on_any_change(i, data):
    body = dict(BODIES[i])
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["set", "drop", "add", "v"]))
        if how == "set":
            body[data.draw(st.sampled_from(sorted(body)))] = data.draw(WIRE)
        elif how == "drop" and body:
            del body[data.draw(st.sampled_from(sorted(body)))]
        elif how == "add":
            body[data.draw(st.text(max_size=6))] = data.draw(WIRE)
        else:
            body["v"] = data.draw(st.sampled_from([True, 1.0, 2, 0, "1", None]))
    assert _fast(body) == _registry(body)


@pytest.mark.parametrize("body", [None, [], "x", {"kind": ["a"]}, {"kind": None}, {}], ids=repr)
def test_not_a_body_is_refused_as_the_registry_refuses_it(body):
    assert _fast(body) == _registry(body)
    assert _fast(body)[0] == "refused"
