"""Who may do what: current grants ∩ stored membership.

* The space owner has read, write and manage; an explicit row cannot change the owner.
* Any other participant: their explicit member row if one exists (a zero-rights row means none
  and also blocks implicit access); otherwise implicit read+write in an `instance` space for a
  registered participant, nothing in `private` and `room` spaces.
* The result is intersected with the principal's current grants (shared_read/write/manage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .state import State
from .vocab import Rights, Scope

IMPLICIT_INSTANCE_RIGHTS = Rights.READ | Rights.WRITE


@dataclass(frozen=True)
class Grants:
    shared_read: bool = False
    shared_write: bool = False
    shared_manage: bool = False

    @classmethod
    def all(cls) -> "Grants":
        return cls(True, True, True)

    def rights(self) -> Rights:
        return _GRANTED[(bool(self.shared_read), bool(self.shared_write), bool(self.shared_manage))]


# the rights of each combination of grants, computed once (Flag arithmetic is slow per call)
_GRANTED = {(r, w, m): (Rights.READ if r else Rights.NONE) | (Rights.WRITE if w else Rights.NONE)
            | (Rights.MANAGE if m else Rights.NONE) for r in (False, True) for w in (False, True) for m in (False, True)}


@dataclass(frozen=True)
class Actor:
    """The authenticated principal behind a command or read, with its current grants."""

    principal: str
    grants: Grants


def membership_rights(state: State, space: int, participant: int | None) -> Rights:
    """Stored rights of a participant row (None = not registered) in a space row, before grants."""
    return Rights(membership_bits(state, space, participant))


_ALL, _IMPLICIT, _INSTANCE = int(Rights.ALL), int(IMPLICIT_INSTANCE_RIGHTS), int(Scope.INSTANCE)


def membership_bits(state: State, space: int, participant: int | None) -> int:
    """membership_rights as its int (decide compares rights in ints: no Flag or Scope made a call)."""
    if participant is None:
        return 0
    if int(state.spaces["owner"][space]) == participant:
        return _ALL
    member = state.member_row(space, participant)
    if member is not None:
        return int(state.members["rights"][member])
    if int(state.spaces["scope"][space]) == _INSTANCE:
        return _IMPLICIT
    return 0


def effective_rights(state: State, space: int, participant: int | None, grants: Grants) -> Rights:
    return membership_rights(state, space, participant) & grants.rights()


def space_reader(state: State, participant: int | None, grants: Grants) -> Callable[[bytes], bool]:
    """Whether this reader (a participant row, None = unregistered, with its current grants) may read
    a space (32-byte ID: lineage ‖ id) in `state` now: READ in grants ∩ membership. Answers are
    kept for the one read it is made for (build a new one for every read: rights change)."""
    memo: dict[bytes, bool] = {}

    def can_read(space: bytes) -> bool:
        if space not in memo:
            row = state.space_row(space[:16], space[16:])
            memo[space] = row is not None and bool(effective_rights(state, row, participant, grants) & Rights.READ)
        return memo[space]

    return can_read
