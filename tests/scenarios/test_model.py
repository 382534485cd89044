"""The scenarios package without a server: the client-side memory object derivation agrees with the
runtime's, generate() stays what it was without inputs, and the rule model's answers for inputs,
cancellations, retirements, publications and grants (no model, no NATS: fast)."""
from __future__ import annotations

import secrets

from aotx.memory import memory_object_id
from aotx.state.memory_rows import MemoryKind
from scenarios import Model, generate, memory_object, receipt_change, same_receipt
from scenarios.model import CANCEL, CONVERSATION, INPUT, MEMBER, PUBLISH, REGISTER, RETIRE, SPACE

LIN = "0123456789abcdef0123456789abcdef"


def test_memory_object_ids_match_the_runtime():
    for _ in range(5):
        lineage, ident = secrets.token_hex(16), secrets.token_hex(16)
        for kind, role in (("text", MemoryKind.TEXT), ("source", MemoryKind.SOURCE),
                           ("embedding", MemoryKind.EMBEDDING), ("interpretation", MemoryKind.INTERPRETATION)):
            assert memory_object(f"op-{lineage}-{ident}", kind) == \
                memory_object_id(bytes.fromhex(lineage), bytes.fromhex(ident), role).hex()


def test_generate_is_backwards_compatible_and_inputs_are_opt_in():
    old = generate(5, 400, ("alice", "bob", "carol"))
    assert not {s["do"] for s in old} & {"input", "cancel", "read_result", "publish", "read_memory"}
    assert old == generate(5, 400, ("alice", "bob", "carol"), inputs=False)
    new = generate(5, 400, ("alice", "bob", "carol"), inputs=True, max_output_tokens=4)
    assert new == generate(5, 400, ("alice", "bob", "carol"), inputs=True, max_output_tokens=4)
    kinds = {s["do"] for s in new}
    assert {"input", "cancel", "read_result", "publish", "read_memory"} <= kinds
    assert all(s["max_output_tokens"] == 4 for s in new if s["do"] == "input")
    assert [s["do"] for s in new[:9]] == ["register"] * 3 + ["space"] * 3 + ["conversation"] * 3


class _Client:
    """Drives a Model as a client would: predict, then admit what the rules say is new."""

    def __init__(self, model: Model) -> None:
        self.m, self.n = model, 0

    def op(self, name: str, seq: int) -> str:
        return f"op-{LIN}-{seq:016x}{self.n:016x}"

    def do(self, name: str, kind: str, fields: dict, space: str | None = None, resource: str | None = None):
        p = self.m.parties[name]
        self.n += 1
        key = f"{self.n:032x}"
        got = self.m.predict(name, kind, fields, p.next, key, space, LIN)
        if got in (201, 202):
            receipt = {"operation": self.op(name, p.next), "sequence": str(p.next), "resource": resource,
                       "execution": "queued"}
            self.m.admit(name, kind, fields, p.next, key, receipt, space)
            return got, receipt
        return got, None


def _setup():
    m = Model(["alice", "bob", "dave"], grants={"dave": {"shared_read", "shared_write"}}, memory=True)
    c = _Client(m)
    for n in ("alice", "bob", "dave"):
        assert c.do(n, REGISTER, {})[0] == 201
    room, notes = f"spc-{LIN}-{'1' * 32}", f"spc-{LIN}-{'2' * 32}"
    con = f"con-{LIN}-{'3' * 32}"
    assert c.do("alice", SPACE, {"scope": "room", "id": "1" * 32}, resource=room)[0] == 201
    assert c.do("alice", SPACE, {"id": "2" * 32}, resource=notes)[0] == 201
    assert c.do("alice", CONVERSATION, {"id": "3" * 32}, space=room, resource=con)[0] == 201
    for who in ("bob", "dave"):
        assert c.do("alice", MEMBER, {"participant": m.parties[who].pid, "permissions": ["read", "write", "manage"]},
                    space=room)[0] == 201
    return m, c, room, notes, con


def test_inputs_cancellations_and_retirement_races():
    m, c, room, notes, con = _setup()
    status, r = c.do("bob", INPUT, {"text": "hi", "model": "x", "max_output_tokens": 4}, space=con)
    assert status == 202
    op = r["operation"]
    seq = int(r["sequence"])
    # the input may end before a cancellation or a retirement above it is decided
    assert m.predict("bob", CANCEL, {"target_sequence": str(seq)}, m.parties["bob"].next, "f" * 32, con) == \
        frozenset({201, 409})
    assert m.predict("bob", RETIRE, {"retry_floor": str(seq + 1)}, seq + 1, "e" * 32) == frozenset({201, 409})
    assert m.predict("alice", CANCEL, {"target_sequence": str(seq)}, m.parties["alice"].next, "f" * 32, con) == 404
    assert m.predict("bob", CANCEL, {"target_sequence": "1"}, m.parties["bob"].next, "f" * 32, con) == 404
    assert m.observe_execution(op, "running") is None
    assert m.observe_execution(op, "cancelled") is not None      # never cancelled without a cancellation
    assert m.observe_execution(op, "completed") is None
    assert m.observe_execution(op, "running") is not None        # an ended input stays ended
    assert m.predict("bob", CANCEL, {"target_sequence": str(seq)}, m.parties["bob"].next, "f" * 32, con) == 409
    assert m.predict("bob", RETIRE, {"retry_floor": str(seq + 1)}, seq + 1, "e" * 32) == 201
    # readers: members read the result, others 404; the author's handle is 410 once retired
    assert m.read_operation_status("alice", op) == 200 and m.read_operation_status("dave", op) == 200
    c.do("bob", RETIRE, {"retry_floor": str(seq + 1)})
    assert m.read_operation_status("bob", op) == 410 and m.read_operation_status("alice", op) == 404


def test_publication_and_grants():
    m, c, room, notes, con = _setup()
    status, r = c.do("alice", INPUT, {"text": "teal", "model": "x"}, space=con)
    op = r["operation"]
    text = memory_object(op)
    pub = {"object": text, "source_version": "1"}
    assert m.predict("alice", PUBLISH, pub, m.parties["alice"].next, "d" * 32, notes) == frozenset({201, 404})
    m.observe_execution(op, "completed")                   # completed: its text memory exists
    assert m.predict("alice", PUBLISH, pub, m.parties["alice"].next, "d" * 32, notes) == 201
    assert m.predict("alice", PUBLISH, pub, m.parties["alice"].next, "d" * 32, room) == 409   # its own space
    assert m.predict("alice", PUBLISH, {**pub, "source_version": "2"}, m.parties["alice"].next, "d" * 32,
                     notes) == 409
    assert m.predict("bob", PUBLISH, pub, m.parties["bob"].next, "d" * 32, notes) == 404      # cannot read notes
    assert m.predict("dave", PUBLISH, pub, m.parties["dave"].next, "d" * 32, notes) == 403    # no manage grant
    assert m.predict("dave", MEMBER, {"participant": m.parties["bob"].pid, "permissions": []},
                     m.parties["dave"].next, "d" * 32, room) == 403
    assert "manage" not in m.rights("dave", room) and "write" in m.rights("dave", room)
    c.do("alice", PUBLISH, pub, space=notes)
    assert m.read_memory_object_status("bob", text) == 200
    copy = [o for o, mem in m.memory.items() if mem.owner == notes]
    assert len(copy) == 1 and m.read_memory_object_status("bob", copy[0]) == 404
    assert m.read_memory_status("bob", notes) == 404 and m.read_memory_status("alice", notes) == 200


def test_receipt_change():
    base = {"operation": "op-x", "sequence": "3", "kind": "conversation.input", "resource": "con-x",
            "command_bytes": 10, "model_digest": "ab", "page_limit": 4, "event_cursor": 1, "execution": "queued",
            "output_bytes": 0, "cancel_requested": False, "lease": None, "result": None, "status_code": 202}
    running = {**base, "execution": "running", "output_bytes": 3, "lease": {"slot": 0}}
    done = {**running, "execution": "completed", "output_bytes": 5, "result": {"byte_length": 5}}
    assert same_receipt(base, running) and same_receipt(running, done) and same_receipt(base, done)
    assert "went back" in receipt_change(running, base)
    assert "terminal" in receipt_change(done, {**done, "output_bytes": 6})
    assert "sequence" in receipt_change(base, {**running, "sequence": "4"})
    assert not same_receipt({"operation": "op-y", "kind": "space.create"}, {"operation": "op-y", "kind": "x"})


def test_client_canonical_input_keeps_absent_sampling_apart_revision_2():
    """As aotx.state.mutations: an absent temperature / top_p is not an explicit 0 / 1, and the
    revision-1 form of an input that omits them is the explicit greedy one (the runtime replays it)."""
    from scenarios.canonical import canonical, legacy
    con = "con-x"
    absent = canonical(INPUT, {"text": "hi", "model": "m"}, "k", con)
    greedy = canonical(INPUT, {"text": "hi", "model": "m", "temperature": 0, "top_p": 1}, "k", con)
    assert absent != greedy and legacy(absent) == greedy and legacy(greedy) == greedy
    assert canonical(INPUT, {"text": "hi", "model": "m", "temperature": None}, "k", con) == absent
