"""A plain-Python model of the shared rules (DESIGN §5): what status each mutation and read must get.

It knows nothing of the runtime: participants with next sequence, retry floor and their unretired
receipts (canonical input → receipt), spaces with owner, scope and explicit member rows, and
conversations. `predict` answers the status a command must get; `admit` records a 201.
Canonical input is modelled as the resolved fields (an omitted id is the operation key, the
default scope is private, permissions are a set), so two bodies that differ only in ways the
runtime canonicalises away compare equal here too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

READ, WRITE, MANAGE = "read", "write", "manage"
ALL_RIGHTS = frozenset({READ, WRITE, MANAGE})
IMPLICIT_INSTANCE = frozenset({READ, WRITE})

REGISTER, RETIRE, SPACE, MEMBER, CONVERSATION = "register", "retire", "space", "member", "conversation"


def canonical(kind: str, fields: dict[str, Any], key: str, space: str | None = None) -> tuple:
    """The resolved input of a mutation (the operation key included, as in the runtime's canonical bytes)."""
    if kind == REGISTER:
        return (kind, key)
    if kind == RETIRE:
        return (kind, key, int(fields["retry_floor"]))
    if kind == SPACE:
        return (kind, key, fields.get("id", key), fields.get("scope", "private"))
    if kind == CONVERSATION:
        return (kind, key, space, fields.get("id", key))
    if kind == MEMBER:
        return (kind, key, space, fields["participant"], frozenset(fields["permissions"]))
    raise ValueError(f"unknown mutation kind {kind}")


@dataclass
class Receipt:
    sequence: int
    key: str
    canon: tuple
    body: dict[str, Any] | None = None   # the receipt JSON as first acknowledged


@dataclass
class Participant:
    name: str
    registered: bool = False
    pid: str | None = None
    next: int = 1
    floor: int = 1
    receipts: dict[int, Receipt] = field(default_factory=dict)     # unretired, by sequence
    retired_ops: set[str] = field(default_factory=set)

    def key_in_use(self, key: str) -> bool:
        return any(r.key == key for r in self.receipts.values())


@dataclass
class Space:
    sid: str
    owner: str
    scope: str
    members: dict[str, frozenset] = field(default_factory=dict)


class Model:
    def __init__(self, names: list[str]) -> None:
        self.parties = {n: Participant(n) for n in names}
        self.spaces: dict[str, Space] = {}
        self.conversations: set[str] = set()

    # ---- rights --------------------------------------------------------------------------------
    def rights(self, name: str, sid: str) -> frozenset:
        s = self.spaces.get(sid)
        p = self.parties[name]
        if s is None or not p.registered:
            return frozenset()
        if s.owner == name:
            return ALL_RIGHTS
        if name in s.members:
            return s.members[name]
        return IMPLICIT_INSTANCE if s.scope == "instance" else frozenset()

    def by_pid(self, pid: str) -> str | None:
        return next((n for n, p in self.parties.items() if p.pid == pid), None)

    # ---- the retry table and the rules ----------------------------------------------------------
    def predict(self, name: str, kind: str, fields: dict[str, Any], seq: int, key: str,
                space: str | None = None, lineage: str = "") -> int:
        p = self.parties[name]
        if not p.registered and kind != REGISTER:
            return 409
        nxt, floor = p.next, p.floor
        if seq > nxt:
            return 409
        if seq < floor:
            return 410
        canon = canonical(kind, fields, key, space)
        if seq < nxt:
            return 200 if p.receipts[seq].canon == canon else 409
        if p.key_in_use(key):
            return 409
        if kind == REGISTER:
            return 409 if p.registered else 201
        if kind == RETIRE:
            f = int(fields["retry_floor"])
            return 409 if f < floor or f > seq else 201
        if kind == SPACE:
            sid = f"spc-{lineage}-{fields.get('id', key)}"
            return 409 if sid in self.spaces else 201
        assert space is not None
        have = self.rights(name, space)
        if READ not in have:
            return 404
        if kind == CONVERSATION:
            if WRITE not in have:
                return 403
            return 409 if f"con-{lineage}-{fields.get('id', key)}" in self.conversations else 201
        if MANAGE not in have:
            return 403
        target = self.by_pid(fields["participant"])
        if target is None:
            return 404
        return 409 if self.spaces[space].owner == target else 201

    def admit(self, name: str, kind: str, fields: dict[str, Any], seq: int, key: str, receipt: dict[str, Any],
              space: str | None = None) -> None:
        """Record an admitted (201) operation and its effect."""
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
        elif kind == SPACE:
            self.spaces[receipt["resource"]] = Space(receipt["resource"], name, fields.get("scope", "private"))
        elif kind == CONVERSATION:
            self.conversations.add(receipt["resource"])
        elif kind == MEMBER:
            target = self.by_pid(fields["participant"])
            assert target is not None and space is not None
            self.spaces[space].members[target] = frozenset(fields["permissions"])

    def read_space_status(self, name: str, sid: str) -> int:
        return 200 if READ in self.rights(name, sid) else 404
