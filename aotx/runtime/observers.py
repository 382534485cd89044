"""Who hears of applied journal messages, live (never during boot replay).

The journal writer applies every acknowledged message (or one a read-back found landed) through
the projector and then tells each observer what it applied: an `Applied` (its subject and stream
sequence, the transfers it completed, and the parsed mutations of the commands those transfers
carry, where the writer has them at hand). Observers are registered with `Observers.add`; the
writer knows none of them. One observer's failure is logged and never reaches the writer or the
other observers. The executor is one (a saved admission starts an input, a saved cancellation
stops one), the change feed (aotx.runtime.targets: what each message concerns, for the broker)
another, the snapshot keeper (aotx.snapshot) a third.

An observer is called synchronously, right after the projector applied that message and before
anything else is applied (the writer feeds and notifies on the event loop without awaiting in
between): it may read the projector, which then holds exactly the stream up to that message, but
must not change it, nor block; slow work goes to a task of its own.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Callable, Mapping, NamedTuple

from ..journal import Transfer
from ..state.mutations import Mutation

log = logging.getLogger("aotx.runtime")
NO_MUTATIONS: Mapping[tuple[bytes, int], Mutation] = MappingProxyType({})


class Applied(NamedTuple):
    """One applied journal message. `mutations`: (lineage, sequence) → the parsed mutation of a
    command this round wrote (a live write; empty for execution writes and read-backs, where the
    stored canonical bytes are the source). A tuple: one is made for every applied message (a frozen
    dataclass's __init__ cost ~7.6k instructions of a followed message, callgrind)."""

    subject: str
    seq: int
    transfers: tuple[Transfer, ...]
    mutations: Mapping[tuple[bytes, int], Mutation] = NO_MUTATIONS


Observer = Callable[[Applied], None]


class Observers:
    """The observers of applied messages, told in the order they were added."""

    def __init__(self) -> None:
        self._observers: list[Observer] = []

    def add(self, observer: Observer) -> Observer:
        self._observers.append(observer)
        return observer

    def remove(self, observer: Observer) -> None:
        if observer in self._observers:
            self._observers.remove(observer)

    def notify(self, applied: Applied) -> None:
        for observer in list(self._observers):
            try:
                observer(applied)
            except Exception:  # an observer's bug must not stop the writer (the message is applied)
                log.exception("observer %r failed on journal message %d of %s", observer, applied.seq,
                              applied.subject)
