"""Apply an acknowledged tick as soon as it is next in the stream, while the rest of its round is in flight.

A round's flights append in parallel and their acks come one by one (nats-server stores and syncs
the messages in turn). A tick of a flight that asks for it (`Flight.early`: command rounds) is
applied the moment it is acknowledged AND every stream message before it is applied — its
sequence is the one after the last applied — and its flight is told (its commands are answered
then, not once the slowest ack of the round came). A tick whose predecessor is not applied yet waits
here until an ack fills the hole; a hole no ack fills (a message whose landing is unknown, another
writer's) is never crossed: the round's finish (writer.apply_landed) deals with what is left, in
stream order, as before. So the projector still holds a prefix of the stream, only acknowledged
messages change it, and each message is applied once (whoever comes first: this, the finish, a
read-back).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .writer import Flight, JournalWriter


class EarlyApply:
    def __init__(self) -> None:
        self._acked: list[tuple[int, int, Any, "Flight"]] = []   # (stream sequence, tick index, tick, flight)

    def acked(self, writer: "JournalWriter", f: "Flight", seq: int, tick: Any) -> None:
        """A tick of `f` was acknowledged at `seq` (already in `f.landed`): apply what is next in order."""
        if f.early is None:
            return
        heapq.heappush(self._acked, (seq, len(f.landed) - 1, tick, f))
        self.drain(writer)

    def drain(self, writer: "JournalWriter") -> None:
        acked = self._acked
        while acked and not writer.failed:
            seq, i, tick, f = acked[0]
            applied = writer.applied_seq()
            if seq > applied + 1:
                return
            heapq.heappop(acked)
            if seq <= applied:   # applied already (a read-back)
                continue
            if not writer.feed_own(f, seq, tick):
                return
            f.early(i)

    def forget(self, flights: list["Flight"]) -> None:
        """The round of these flights finishes: what of it is still waiting here is the finish's."""
        if self._acked:
            mine = set(map(id, flights))
            self._acked = [e for e in self._acked if id(e[3]) not in mine]
            heapq.heapify(self._acked)
