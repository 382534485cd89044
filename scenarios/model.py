"""A plain-Python model of the shared rules (DESIGN §5): what status each mutation and read must get.

It knows nothing of the runtime: participants with next sequence, retry floor and their unretired
receipts (canonical input → receipt), spaces with owner, scope and explicit member rows,
conversations, inputs with what the client has seen of their execution, and the text memory
the client knows exists. `predict` answers the status a command must get — one status, or the
set of statuses the rules allow where the outcome depends on timing the client cannot see
(a cancellation racing completion, a retirement racing an input's end, memory of a running
input) — and `admit` records a 201/202.

Canonical input is modelled as the resolved fields (an omitted id is the operation key, the
default scope is private, permissions are a set, input parameters take their defaults), so two
bodies that differ only in ways the runtime canonicalises away compare equal here too.

Rights are the stored membership ∩ the principal's current grants (shared_read, shared_write,
shared_manage), as the runtime checks them on every admission and read.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from .canonical import MEMORY_ROLES, canonical, legacy, memory_object
from .records import Input, Memory, Participant, Receipt, Space
from .vocabulary import (ALL_GRANTS, ALL_RIGHTS, CANCEL, CONVERSATION, EXECUTIONS, GRANT_NEEDED, GRANT_RIGHT,
                         IMPLICIT_INSTANCE, INPUT, MANAGE, MEMBER, NEW_STATUSES, PUBLISH, QUEUED, READ, REGISTER,
                         RETIRE, RUNNING, SPACE, TERMINAL, WRITE)

__all__ = ["ALL_GRANTS", "ALL_RIGHTS", "CANCEL", "CONVERSATION", "EXECUTIONS", "GRANT_NEEDED", "IMPLICIT_INSTANCE",
           "INPUT", "MANAGE", "MEMBER", "MEMORY_ROLES", "NEW_STATUSES", "PUBLISH", "QUEUED", "READ", "REGISTER",
           "RETIRE", "RUNNING", "SPACE", "TERMINAL", "WRITE", "Input", "Memory", "Model", "Participant", "Receipt",
           "Space", "canonical", "memory_object"]


class Model:
    def __init__(self, names: list[str], *, grants: Mapping[str, Iterable[str]] | None = None,
                 execution: bool = True, memory: bool = False, model_id: str | None = None) -> None:
        """names: the principals; grants: each one's current grants (default: all three);
        execution: the server runs inputs (a model service); memory: it retains inputs as memory
        and serves the memory routes; model_id: the served model (None: any name is served)."""
        self.parties = {n: Participant(n) for n in names}
        self.grants = {n: frozenset(ALL_GRANTS if grants is None or n not in grants else grants[n]) for n in names}
        self.spaces: dict[str, Space] = {}
        self.conversations: dict[str, str] = {}        # conversation -> its space
        self.inputs: dict[str, Input] = {}             # operation -> input, in admission order
        self.memory: dict[str, Memory] = {}            # text object -> known text memory
        self.execution, self.memory_enabled, self.model_id = execution, memory, model_id
        self.epoch = 0                                  # bumped by every runtime restart the client knows of

    # ---- rights --------------------------------------------------------------------------------
    def granted(self, name: str) -> frozenset:
        return frozenset(GRANT_RIGHT[g] for g in self.grants[name])

    def rights(self, name: str, sid: str) -> frozenset:
        s = self.spaces.get(sid)
        p = self.parties[name]
        if s is None or not p.registered:
            return frozenset()
        if s.owner == name:
            stored = ALL_RIGHTS
        elif name in s.members:
            stored = s.members[name]
        else:
            stored = IMPLICIT_INSTANCE if s.scope == "instance" else frozenset()
        return stored & self.granted(name)

    def by_pid(self, pid: str) -> str | None:
        return next((n for n, p in self.parties.items() if p.pid == pid), None)

    def inputs_of(self, name: str) -> list[Input]:
        return [i for i in self.inputs.values() if i.actor == name]

    def input_at(self, name: str, seq: int) -> Input | None:
        return next((i for i in self.inputs.values() if i.actor == name and i.seq == seq), None)

    # ---- the retry table and the rules ----------------------------------------------------------
    def predict(self, name: str, kind: str, fields: dict[str, Any], seq: int, key: str,
                space: str | None = None, lineage: str = "") -> int | frozenset[int]:
        """The status the command must get, or the set of statuses the rules allow (timing)."""
        p = self.parties[name]
        if GRANT_NEEDED[kind] not in self.grants[name]:
            return 403
        if not p.registered and kind != REGISTER:
            return 409
        nxt, floor = p.next, p.floor
        if seq > nxt:
            return 409
        if seq < floor:
            return 410
        canon = canonical(kind, fields, key, space)
        if seq < nxt:
            return 200 if p.receipts[seq].canon in (canon, legacy(canon)) else 409
        if p.key_in_use(key):
            return 409
        if kind == REGISTER:
            return 409 if p.registered else 201
        if kind == RETIRE:
            f = int(fields["retry_floor"])
            if f < floor or f > seq:
                return 409
            running = [i for i in self.inputs_of(name) if i.seq < f and not i.retired and not i.ended]
            return frozenset({201, 409}) if running else 201   # 409 while one below the floor still runs
        if kind == SPACE:
            sid = f"spc-{lineage}-{fields.get('id', key)}"
            return 409 if sid in self.spaces else 201
        assert space is not None
        if kind in (INPUT, CANCEL):
            return self._predict_on_conversation(name, kind, fields, space)
        have = self.rights(name, space)
        if READ not in have:
            return 404
        if kind == CONVERSATION:
            if WRITE not in have:
                return 403
            return 409 if f"con-{lineage}-{fields.get('id', key)}" in self.conversations else 201
        if MANAGE not in have:
            return 403
        if kind == PUBLISH:
            return self._predict_publish(name, fields, space)
        target = self.by_pid(fields["participant"])
        if target is None:
            return 404
        return 409 if self.spaces[space].owner == target else 201

    def _predict_on_conversation(self, name: str, kind: str, fields: dict[str, Any], con: str):
        sid = self.conversations.get(con)
        have = frozenset() if sid is None else self.rights(name, sid)
        if READ not in have:
            return 404
        if WRITE not in have:
            return 403
        if kind == INPUT:
            if not self.execution:
                return 409                      # no model service: inputs are refused
            if self.model_id is not None and fields["model"] != self.model_id:
                return 404
            return 202
        target = self.input_at(name, int(fields["target_sequence"]))
        if target is None or target.retired:
            return 404
        if target.con != con:
            return 409
        if target.cancel_requested or target.ended:
            return 409
        return frozenset({201, 409})            # 409 when it ended before the cancellation was decided

    def _predict_publish(self, name: str, fields: dict[str, Any], dest: str):
        if not self.memory_enabled:
            return 409
        obj = fields["object"]
        known = self.memory.get(obj)
        maybe = None if known is not None else self.maybe_memory(obj)
        m = known or maybe
        if m is None:
            return 404
        if READ not in self.rights(name, m.owner):
            return 404
        status = 409 if int(fields["source_version"]) != m.version or dest == m.owner else 201
        return status if known is not None else frozenset({status, 404})

    def maybe_memory(self, obj: str) -> Memory | None:
        """The text memory an input not yet known to have retained it may have written by now."""
        for i in self.inputs.values():
            if i.text_object == obj:
                return Memory(obj, i.space, 1, i.op, i.text)
        return None

    def admit(self, name: str, kind: str, fields: dict[str, Any], seq: int, key: str, receipt: dict[str, Any],
              space: str | None = None) -> None:
        """Record an admitted (201/202) operation and its effect."""
        p = self.parties[name]
        assert seq == p.next, (name, seq, p.next)
        p.receipts[seq] = Receipt(seq, key, canonical(kind, fields, key, space), receipt)
        p.next += 1
        if kind == REGISTER:
            p.registered, p.pid = True, f"par-{receipt['operation'].split('-')[1]}-{key}"
        elif kind == RETIRE:
            p.floor = int(fields["retry_floor"])
            for s in [s for s in p.receipts if s < p.floor]:
                r = p.receipts.pop(s)
                if r.body is not None:
                    p.retired_ops.add(r.body["operation"])
            for i in self.inputs_of(name):
                if i.seq < p.floor:             # admitted: every receipt below the floor had ended
                    i.retired = i.ended = True
        elif kind == SPACE:
            self.spaces[receipt["resource"]] = Space(receipt["resource"], name, fields.get("scope", "private"))
        elif kind == CONVERSATION:
            self.conversations[receipt["resource"]] = space
        elif kind == MEMBER:
            target = self.by_pid(fields["participant"])
            assert target is not None and space is not None
            self.spaces[space].members[target] = frozenset(fields["permissions"])
        elif kind == INPUT:
            op = receipt["operation"]
            self.inputs[op] = Input(op, name, seq, space, self.conversations[space], fields["text"], self.epoch)
        elif kind == CANCEL:
            target = self.input_at(name, int(fields["target_sequence"]))
            assert target is not None
            target.cancel_requested = True
        elif kind == PUBLISH:
            origin = self.memory.get(fields["object"]) or self.maybe_memory(fields["object"])
            assert origin is not None
            self.memory.setdefault(origin.obj, origin)     # a 201 proves the origin exists
            obj = memory_object(receipt["operation"], "text")
            self.memory[obj] = Memory(obj, space, 1, receipt["operation"], origin.text)

    # ---- what the client sees of execution and memory ------------------------------------------
    def allowed_ends(self, op: str, *, crashes: bool = False) -> frozenset[str]:
        """The terminal states an input may reach: `completed`; `cancelled` only after an admitted
        cancellation; `interrupted` only across a restart. Where the client cannot know of restarts
        or load (crashes=True: a drill), any end."""
        i = self.inputs[op]
        if crashes:
            return TERMINAL
        ends = {"completed"}
        if i.cancel_requested:
            ends.add("cancelled")
        if i.epoch < self.epoch:
            ends.add("interrupted")
        return frozenset(ends)

    def observe_execution(self, op: str, execution: str, *, crashes: bool = False) -> str | None:
        """Record an execution state seen for `op`; answers what is wrong with it, or None."""
        i = self.inputs.get(op)
        if i is None:
            return None
        if execution not in EXECUTIONS:
            return f"unknown execution state {execution!r}"
        if i.execution in TERMINAL:
            return None if execution == i.execution else f"ended {i.execution}, now reads {execution}"
        if execution == QUEUED and i.execution == RUNNING:
            return "went back from running to queued"
        if execution in TERMINAL:
            if execution not in self.allowed_ends(op, crashes=crashes):
                return (f"ended {execution}, which the rules do not allow here (cancel requested: "
                        f"{i.cancel_requested}, admitted in epoch {i.epoch}, now {self.epoch})")
            i.ended = True
            if execution == "completed" and self.memory_enabled and i.text_object not in self.memory:
                self.memory[i.text_object] = Memory(i.text_object, i.space, 1, i.op, i.text)
        i.execution = execution
        return None

    def memory_expected(self, op: str) -> bool:
        """Whether the input's text memory must exist: it completed on a server that keeps memory."""
        i = self.inputs[op]
        return self.memory_enabled and i.execution == "completed"

    def saw_memory(self, obj: str, owner: str) -> None:
        """A text row seen in a listing: note it when it is an input's retained text."""
        if obj in self.memory:
            return
        m = self.maybe_memory(obj)
        if m is not None and m.owner == owner:
            self.memory[obj] = m

    # ---- reads -----------------------------------------------------------------------------------
    def read_space_status(self, name: str, sid: str) -> int:
        if "shared_read" not in self.grants[name]:
            return 403
        return 200 if READ in self.rights(name, sid) else 404

    def read_operation_status(self, name: str, op: str) -> int:
        """GET /operations/{op} (and its result and events): own receipts 200 (410 once retired);
        another member's input 200 while the reader can read its space and it is not retired; else 404."""
        if "shared_read" not in self.grants[name]:
            return 403
        p = self.parties[name]
        if op in p.retired_ops:
            return 410
        if any(r.body is not None and r.body["operation"] == op for r in p.receipts.values()):
            return 200
        i = self.inputs.get(op)
        if i is None or i.retired or READ not in self.rights(name, i.space):
            return 404
        return 200

    def read_result_status(self, name: str, op: str) -> int:
        """GET /operations/{op}/result and /events: as the receipt, but an own input's result also
        needs current read rights in its space (403 without: its receipt tells the author it exists)."""
        status = self.read_operation_status(name, op)
        i = self.inputs.get(op)
        if status == 200 and i is not None and i.actor == name and READ not in self.rights(name, i.space):
            return 403
        return status

    def read_memory_status(self, name: str, sid: str) -> int:
        return self.read_space_status(name, sid)

    def read_memory_object_status(self, name: str, obj: str) -> int | frozenset[int]:
        """GET /memory/{object}: 200 when it exists and its owner space is readable; else 404."""
        m = self.memory.get(obj)
        maybe = m is None
        m = m or self.maybe_memory(obj)
        if m is None:
            return 404
        if "shared_read" not in self.grants[name]:
            return frozenset({403, 404}) if maybe else 403
        status = 200 if READ in self.rights(name, m.owner) else 404
        return frozenset({status, 404}) if maybe else status
