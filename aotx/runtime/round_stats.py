"""What a runtime's writer does with its time, counted (off by default): the instrument of issue 15 part 5.

`AOTX_ROUND_STATS=<file>` switches it on for a process: cumulative counters (counts and seconds, on the
event loop's clock) of the command rounds — how many, their commands, flights and messages, the time in
each stage (the pre-round catch-up's STREAM.INFO and read-back, planning and encoding, the append's wait
for its ack, applying and answering, the read-backs of other writers' messages met between a round's
own) — of the commands' wait in the queue before their round and in the runtime in all, of the follower
(runs, messages, time waiting for the writer's lock and applying under it), of every read-back, of the
runtime's requests (rpc) and of lease acquisitions. The counters are written to the file as one JSON
object at most every WRITE_EVERY seconds (and at exit), replaced whole (a reader never sees half of
one): a bench reads it before and after its measured window and prints the differences.

Nothing here changes what the runtime does; off, each hook is one attribute test.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from pathlib import Path
from typing import Optional

ENV = "AOTX_ROUND_STATS"
WRITE_EVERY = 0.25   # seconds between writes of the file, at most


class RoundStats:
    def __init__(self, path: Optional[str]) -> None:
        self.path = Path(path) if path else None
        self.on = self.path is not None
        self.counts: dict[str, float] = {}
        self._written = 0.0
        if self.on:
            atexit.register(self.write)

    def add(self, name: str, value: float = 1.0) -> None:
        """Add to a counter (call only where `on`); writes the file when WRITE_EVERY passed."""
        self.counts[name] = self.counts.get(name, 0.0) + value
        now = time.monotonic()
        if now - self._written >= WRITE_EVERY:
            self._written = now
            self.write()

    def write(self) -> None:
        if self.path is None:
            return
        out = {**self.counts, "at": time.monotonic(), "cpu": time.process_time()}
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(out))
            tmp.replace(self.path)
        except OSError:   # an instrument never stops the runtime; the next write tries again
            return


STATS = RoundStats(os.environ.get(ENV))
clock = time.perf_counter


def read(path: Path) -> dict[str, float]:
    """The counters a process last wrote ({} before its first write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
