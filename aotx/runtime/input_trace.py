"""When each stage of a shared input's run happened, for the benchmark's breakdown of the time before
its first output (ops.bench.shared_inputs prints it); the same for stored responses (`stamp_response`,
ops.bench.stored_responses).

Off unless the environment variable AOTX_INPUT_TRACE names a file when the process starts; then every
`stamp` keeps one row that becomes the JSON line `{"input": "<lineage hex>/<sequence>", "stage": "<name>",
"t": <seconds>}` of that file, `t` on the CLOCK_MONOTONIC clock (time.monotonic: on Linux the same clock
as a client's time.perf_counter on that host, so the bench puts the server's stages on its own time
line). Rows are kept in memory and written when the process exits (atexit; `flush`), or once
FLUSH_ROWS are kept: a stamp makes no syscall on the event loop (a write lets the engine thread take
the GIL, and only the stamped requests would pay for it: the stored responses, not the store:false ones
they are measured against). Off, a stamp costs one attribute test. Not a log: the bench reads the file
once the server stopped.

Stages, in order: `received` (the gateway's route parsed the POST), `round` (the command round that
decides it began), `acked` (that round's append acknowledged), `begun` (the lease applied: the run starts), `embedded` (the input's vector),
`prompt` (recall and the prompt built), `submitted` (asked of the engine: before `begun` where its
prompt cannot depend on recall, aotx.runtime.early_start), `first_delta` (the engine's
first delta), `first_output` (the write of the first output bytes acknowledged: readers may see them),
`last_delta` (the run took the engine's final delta: `completed` - `last_delta` is what its end's write
cost), `completed` (the write of its end acknowledged, its memory input in it or before it).
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import time
from typing import IO, Optional

log = logging.getLogger("aotx.runtime")
ENV = "AOTX_INPUT_TRACE"
FLUSH_ROWS = 50_000   # rows kept before they are written (memory bound)


class InputTrace:
    def __init__(self, path: Optional[str]) -> None:
        self._file: Optional[IO[str]] = None
        self._rows: list[tuple[str, str, float]] = []
        if path:
            try:
                self._file = open(path, "a", encoding="utf-8")
            except OSError as exc:
                log.warning("input trace %s could not be opened: %s", path, exc)
            else:
                atexit.register(self.flush)

    @property
    def on(self) -> bool:
        return self._file is not None

    def stamp(self, lineage: bytes, sequence: int, stage: str) -> None:
        if self._file is not None:
            self.stamp_key(f"{lineage.hex()}/{sequence}", stage)

    def stamp_key(self, key: str, stage: str) -> None:
        if self._file is not None:
            self._rows.append((key, stage, time.monotonic()))
            if len(self._rows) >= FLUSH_ROWS:
                self.flush()

    def flush(self) -> None:
        """Write the rows kept so far as whole lines."""
        if self._file is None or not self._rows:
            return
        rows, self._rows = self._rows, []
        self._file.write("".join(json.dumps({"input": k, "stage": s, "t": t}) + "\n" for k, s, t in rows))
        self._file.flush()


TRACE = InputTrace(os.environ.get(ENV))


def stamp(lineage: bytes, sequence: int, stage: str) -> None:
    TRACE.stamp(lineage, sequence, stage)


def stamp_response(response_id: str, stage: str) -> None:
    """A stored /v1/responses request's stage (ops.bench.stored_responses): `create_sent`, `submitted`,
    `create_acked`, `finish_sent`, `finish_acked`; the `input` field holds the response id."""
    TRACE.stamp_key(response_id, stage)
