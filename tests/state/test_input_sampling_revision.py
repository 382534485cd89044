"""Shared inputs' sampling defaults, revision 2: an absent temperature / top_p is `null` in the
canonical bytes (the served model's default at execution), kept apart from an explicit value.
Inputs journalled by revision 1 (the absent fields written as 0.0 / 1.0) decode and retry exactly
as before."""

from __future__ import annotations

from aotx.sampling_defaults import SamplingDefaults, resolved
from aotx.state import Command, MutationKind, SubmitInput, canonical_bytes, decide, lineage_for, parse_mutation
from aotx.state.mutation_forms import from_canonical

from .helpers import body
from .test_execution import CTX, MODEL, _input, _room

ALICE = lineage_for("alice")
CON = f"con-{ALICE.hex()}-{3:032x}"
# an input as revision 1 journalled it (the caller sent neither temperature nor top_p)
REVISION_1 = (
    b'{"conversation":"con-' + ALICE.hex().encode() + b'-00000000000000000000000000000003",'
    b'"lineage":"' + ALICE.hex().encode() + b'","max_output_tokens":256,"media":[],"model":"m",'
    b'"mutation":"conversation.input","operation_key":"00000000000000000000000000000004",'
    b'"pages":null,"schema":"aotx.shared.mutation.v1","sequence":"4","temperature":0.0,"text":"hi",'
    b'"top_p":1.0}')


def _parse(**fields) -> SubmitInput:
    return parse_mutation(MutationKind.INPUT, body("alice", 4, 4, **{"text": "hi", "model": MODEL, **fields}), CON)


def test_revision_1_bytes_decode_to_greedy_and_encode_back_unchanged():
    m = from_canonical(REVISION_1)
    assert (m.temperature, m.top_p) == (0.0, 1.0)
    assert canonical_bytes(m) == REVISION_1


def test_absent_fields_are_null_in_the_bytes_and_apart_from_explicit_values():
    absent = _parse()
    assert (absent.temperature, absent.top_p) == (None, None)
    assert b'"temperature":null' in canonical_bytes(absent) and b'"top_p":null' in canonical_bytes(absent)
    assert _parse(temperature=None, top_p=None) == absent          # null is absent
    assert canonical_bytes(_parse(temperature=0, top_p=1)) == REVISION_1   # explicit greedy: revision 1's bytes
    assert from_canonical(canonical_bytes(absent)) == absent


def test_an_exact_retry_of_a_revision_1_input_replays_it():
    d, con = _room()
    old = from_canonical(REVISION_1)          # admitted as revision 1 wrote it
    assert _input(d, con, 4, 4, temperature=0, top_p=1).status == 202
    assert d.state.commands[d.state.receipt_slot(ALICE, 4)] == canonical_bytes(old) == REVISION_1
    retry = decide(d.state, Command(d.actor("alice"), _parse(), CTX))     # the same body, sent again now
    assert retry.status == 200


def test_a_new_input_without_sampling_is_another_operation_than_an_explicit_one():
    d, con = _room()
    assert _input(d, con, 4, 4).status == 202
    assert decide(d.state, Command(d.actor("alice"), _parse(), CTX)).status == 200
    assert decide(d.state, Command(d.actor("alice"), _parse(temperature=0.2), CTX)).status == 409
    assert decide(d.state, Command(d.actor("alice"), _parse(temperature=0, top_p=1), CTX)).status == 409


def test_execution_takes_the_models_defaults_for_what_is_absent():
    d = SamplingDefaults(temperature=0.2, top_p=0.9)
    assert resolved(d, None, None) == (0.2, 0.9)
    assert resolved(d, 0.0, None) == (0.0, 0.9) and resolved(d, None, 1.0) == (0.2, 1.0)
    assert resolved(d, *(lambda m: (m.temperature, m.top_p))(from_canonical(REVISION_1))) == (0.0, 1.0)
