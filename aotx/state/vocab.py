"""Small enumerations shared by tables, events and rules (their codes are stored in rows)."""

from __future__ import annotations

import enum


class MutationKind(enum.IntEnum):
    REGISTER = 1          # POST /participant
    RETIRE = 2            # POST /participant/retirements
    CREATE_SPACE = 3      # POST /spaces
    SET_MEMBER = 4        # POST /spaces/{space}/members
    CREATE_CONVERSATION = 5  # POST /spaces/{space}/conversations
    INPUT = 6             # POST /conversations/{con}/inputs
    CANCEL = 7            # POST /conversations/{con}/cancellations
    PUBLISH = 8           # POST /spaces/{space}/publications

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> "MutationKind":
        for kind, name in _LABELS.items():
            if name == label:
                return kind
        raise ValueError(f"unknown mutation kind {label!r}")


_LABELS = {
    MutationKind.REGISTER: "participant.register",
    MutationKind.RETIRE: "participant.retire",
    MutationKind.CREATE_SPACE: "space.create",
    MutationKind.SET_MEMBER: "space.members.set",
    MutationKind.CREATE_CONVERSATION: "conversation.create",
    MutationKind.INPUT: "conversation.input",
    MutationKind.CANCEL: "conversation.cancel",
    MutationKind.PUBLISH: "space.publish",
}


class Scope(enum.IntEnum):
    PRIVATE = 1
    ROOM = 2
    INSTANCE = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> "Scope":
        for scope in cls:
            if scope.label == label:
                return scope
        raise ValueError(f"unknown scope {label!r}")


class Rights(enum.IntFlag):
    NONE = 0
    READ = 1
    WRITE = 2
    MANAGE = 4
    ALL = 7

    def labels(self) -> list[str]:
        return [name for bit, name in _RIGHT_NAMES if self & bit]

    @classmethod
    def from_labels(cls, labels) -> "Rights":
        out = cls.NONE
        for label in labels:
            out |= {name: bit for bit, name in _RIGHT_NAMES}[label]
        return out


_RIGHT_NAMES = ((Rights.READ, "read"), (Rights.WRITE, "write"), (Rights.MANAGE, "manage"))
RIGHT_LABELS = tuple(name for _, name in _RIGHT_NAMES)


class ResourceKind(enum.IntEnum):
    NONE = 0
    PARTICIPANT = 1
    SPACE = 2
    CONVERSATION = 3
    MEMBER = 4            # resource = the member's participant ID


class Transport(enum.IntEnum):
    NONE = 0
    ACCEPTED = 1


class Commit(enum.IntEnum):
    NONE = 0
    COMMITTED = 1


class Admission(enum.IntEnum):
    NONE = 0
    SAVED = 1


class Terminal(enum.IntEnum):
    PENDING = 0
    SAVED = 1


class Execution(enum.IntEnum):
    """Where an input's execution stands (receipt `execution`); NONE for every other kind."""

    NONE = 0
    QUEUED = 1        # admission saved, no lease yet
    RUNNING = 2       # lease saved: assigned to an execution slot
    COMPLETED = 3
    CANCELLED = 4
    INTERRUPTED = 5   # a restart found the admission unfinished; never re-executed
    FAILED = 6
    DEADLINE_EXCEEDED = 7  # past the execution deadline (from the lease); the receipt's status is 504

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def terminal(self) -> bool:
        return self >= Execution.COMPLETED
