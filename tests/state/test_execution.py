"""Inputs in the pure core: admission, cancellation, execution transfers, result reads."""

from __future__ import annotations

import base64

import pytest

from aotx.journal import TransferKind
from aotx.journal.lease import Lease, LeaseRevision, LeaseRow
from aotx.state import (Accepted, ApplyError, Command, EventCodecError, ExecutionContext, InputAdmitted,
                        InputCancelled, ModelCaps, MutationKind, Refusal, apply, decide, decode_event, encode_event,
                        lineage_for, parse_mutation, result_view, state_hash, transfer_kind)
from aotx.state.apply import freeze, owned_copy
from aotx.state.execution import (InputCompleted, LeaseApplied, OutputAppended, apply_execution_into,
                                  default_lease, execution_body, execution_from_body)
from aotx.state.vocab import Execution

from .helpers import Driver, body

MODEL = "m"
CTX = ExecutionContext({MODEL: ModelCaps(bytes(range(32)))}, page_grant=64)
ALICE = lineage_for("alice")


def _room() -> tuple[Driver, str]:
    d = Driver()
    d.register("alice")
    d.send("alice", MutationKind.CREATE_SPACE, 2, 2, scope="room")
    d.send("alice", MutationKind.CREATE_CONVERSATION, 3, 3, space=d.spc("alice", 2))
    return d, f"con-{ALICE.hex()}-{3:032x}"


def _input(d: Driver, con: str, seq: int, key: int, **fields):
    m = parse_mutation(MutationKind.INPUT, body("alice", seq, key, **{"text": "hi", "model": MODEL, **fields}), con)
    decision = decide(d.state, Command(d.actor("alice"), m, CTX))
    if isinstance(decision, Accepted):
        for e in decision.events:
            d.state = apply(d.state, e)
    return decision


def _exec(d: Driver, event) -> None:
    s = owned_copy(d.state)
    apply_execution_into(s, event)
    d.state = freeze(s)


def test_admission_records_digest_and_page_limit_apart_from_the_callers_bytes():
    d, con = _room()
    decision = _input(d, con, 4, 4)
    assert isinstance(decision, Accepted) and decision.status == 202
    (event,) = decision.events
    assert isinstance(event, InputAdmitted) and event.page_limit == 64 and event.model_digest == bytes(range(32))
    assert decode_event(encode_event(event)) == event and transfer_kind(event) == TransferKind.ADMISSION
    assert b'"pages":null' in event.op.command and bytes(range(32)) not in event.op.command
    slot = d.state.receipt_slot(ALICE, 4)
    assert d.state.executions[slot].status is Execution.QUEUED
    # defaults are part of the canonical bytes: an explicit default is the same input
    again = parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text="hi", model=MODEL, max_output_tokens=256,
                                                    media=[]), con)
    assert decide(d.state, Command(d.actor("alice"), again, CTX)).status == 200
    # but not temperature / top_p (revision 2): absent is the model's default, apart from explicit greedy
    # (tests/state/test_input_sampling_revision.py)
    greedy = parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text="hi", model=MODEL, temperature=0,
                                                     top_p=1), con)
    assert decide(d.state, Command(d.actor("alice"), greedy, CTX)).status == 409


def test_input_refusals():
    d, con = _room()
    assert _input(d, con, 4, 4, model="other").status == 404
    assert _input(d, con, 4, 4, pages=65).status == 409
    media = [{"type": "audio", "sha256": "0" * 64}]
    refusal = _input(d, con, 4, 4, media=media)
    assert isinstance(refusal, Refusal) and refusal.status == 409 and "media" in refusal.message
    m = parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text="hi", model=MODEL), con)
    no_model = decide(d.state, Command(d.actor("alice"), m, None))
    assert no_model.status == 409 and "no model service" in no_model.message
    d.register("bob")
    m = parse_mutation(MutationKind.INPUT, body("bob", 2, 2, text="hi", model=MODEL), con)
    assert decide(d.state, Command(d.actor("bob"), m, CTX)).status == 404  # not a member: existence hidden


def test_execution_transfers_apply_in_order_and_fail_closed():
    d, con = _room()
    _input(d, con, 4, 4)
    slot = d.state.receipt_slot(ALICE, 4)
    with pytest.raises(ApplyError, match="not running"):
        _exec(d, OutputAppended(ALICE, 4, 0, b"x"))
    with pytest.raises(ApplyError, match="revision 2 or later"):
        _exec(d, LeaseApplied(ALICE, Lease(LeaseRevision.R1, (LeaseRow(0, 0, 4, ALICE),))))
    before = state_hash(d.state)
    _exec(d, LeaseApplied(ALICE, default_lease(ALICE, 4, 7)))
    assert d.state.executions[slot].status is Execution.RUNNING and d.state.executions[slot].lease_slot == 7
    with pytest.raises(ApplyError, match="not queued"):
        _exec(d, LeaseApplied(ALICE, default_lease(ALICE, 4, 1)))
    _exec(d, OutputAppended(ALICE, 4, 0, "é".encode()[:1]))
    with pytest.raises(ApplyError, match="offset 0"):
        _exec(d, OutputAppended(ALICE, 4, 0, b"z"))
    _exec(d, OutputAppended(ALICE, 4, 1, "é".encode()[1:] + b"!"))
    assert state_hash(d.state) != before
    _exec(d, InputCompleted(ALICE, 4, Execution.COMPLETED, 9, 2, "stop"))
    assert int(d.state.receipts[slot]["terminal"]) == 1 and int(d.state.receipts[slot]["result_len"]) == 3
    with pytest.raises(ApplyError, match="already completed"):
        _exec(d, InputCompleted(ALICE, 4, Execution.FAILED))
    # bodies round-trip and refuse anything else
    for event in (LeaseApplied(ALICE, default_lease(ALICE, 4, 7)), OutputAppended(ALICE, 4, 1, b"ab"),
                  InputCompleted(ALICE, 4, Execution.CANCELLED, 1, 0, "cancelled")):
        kind = {LeaseApplied: TransferKind.LEASE, OutputAppended: TransferKind.OUTPUT,
                InputCompleted: TransferKind.COMPLETION}[type(event)]
        assert execution_from_body(kind, execution_body(event)) == event
        with pytest.raises(EventCodecError):
            execution_from_body(kind, {**execution_body(event), "extra": 1})
        with pytest.raises(EventCodecError):
            execution_from_body(TransferKind.MUTATION, execution_body(event))
    with pytest.raises(EventCodecError, match="not terminal"):
        execution_from_body(TransferKind.COMPLETION, {**execution_body(InputCompleted(ALICE, 4, Execution.FAILED)),
                                                      "execution": int(Execution.RUNNING)})


def test_result_reads_exact_bytes_and_never_repair_partial_utf8():
    d, con = _room()
    _input(d, con, 4, 4)
    _exec(d, LeaseApplied(ALICE, default_lease(ALICE, 4, 0)))
    _exec(d, OutputAppended(ALICE, 4, 0, "aé".encode()))
    op = f"op-{ALICE.hex()}-{d.state.receipts[d.state.receipt_slot(ALICE, 4)]['operation'].tobytes().hex()}"
    actor = d.actor("alice")
    whole = result_view(d.state, actor, op)
    assert base64.b64decode(whole["bytes"]) == "aé".encode() and whole["text"] == "aé"
    assert whole["input_tokens"] is None and whole["complete"] is False and whole["execution"] == "running"
    half = result_view(d.state, actor, op, 0, 2)
    assert half["byte_length"] == 2 and half["text"] is None and half["next_offset"] == 2
    rest = result_view(d.state, actor, op, 2)
    assert base64.b64decode(rest["bytes"]) == "é".encode()[1:] and rest["text"] is None
    assert result_view(d.state, actor, op, 4).status == 416
    _exec(d, InputCompleted(ALICE, 4, Execution.COMPLETED, 5, 2, "length"))
    done = result_view(d.state, actor, op)
    assert (done["input_tokens"], done["output_tokens"], done["finish"], done["complete"]) == (5, 2, "length", True)
    d.register("bob")
    assert result_view(d.state, d.actor("bob"), op).status == 404   # not a member of the room


def test_reserved_media_tokens_and_lone_surrogates_are_refused_before_anything_is_retained():
    from aotx.state import MalformedMutation
    d, con = _room()
    for text in (f"see [image:{'a' * 64}]", f"x\n[audio:{'0' * 64}] y", "bad \ud800 text"):
        with pytest.raises(MalformedMutation):
            parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text=text, model=MODEL), con)
    with pytest.raises(MalformedMutation, match="model"):
        parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text="hi", model="m\udc00"), con)
    # near misses are ordinary text
    for text in ("[image:abc]", f"[video:{'a' * 64}]", f"[image:{'A' * 64}]"):
        assert parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text=text, model=MODEL), con).text == text


def test_cancellation_targets_exactly_one_unfinished_input():
    d, con = _room()
    _input(d, con, 4, 4)
    m = parse_mutation(MutationKind.CANCEL, body("alice", 5, 5, target_sequence="4"), con)
    decision = decide(d.state, Command(d.actor("alice"), m))
    assert isinstance(decision, Accepted) and isinstance(decision.events[0], InputCancelled)
    d.state = apply(d.state, decision.events[0])
    assert d.state.executions[d.state.receipt_slot(ALICE, 4)].cancel_requested
    assert d.state.executions[d.state.receipt_slot(ALICE, 5)] is None
    m = parse_mutation(MutationKind.CANCEL, body("alice", 6, 6, target_sequence="3"), con)
    assert decide(d.state, Command(d.actor("alice"), m)).status == 404   # sequence 3 is no input


def test_an_output_budget_that_cannot_fit_the_models_context_is_refused():
    """max_output_tokens must leave the prompt at least one token of the model's context window
    (the context is known per model; 0 = not stated, no check); nothing is admitted."""
    ctx = ExecutionContext({MODEL: ModelCaps(bytes(range(32)), context_tokens=1024)}, page_grant=64)
    d, con = _room()

    def send(**fields):
        m = parse_mutation(MutationKind.INPUT, body("alice", 4, 4, text="hi", model=MODEL, **fields), con)
        return decide(d.state, Command(d.actor("alice"), m, ctx))
    refusal = send(max_output_tokens=1 << 20)
    assert isinstance(refusal, Refusal) and refusal.status == 400 and refusal.type == "context_length_exceeded"
    assert "max_output_tokens" in refusal.message and "1024" in refusal.message
    assert send(max_output_tokens=1024).status == 400
    assert send(max_output_tokens=1023).status == 202
