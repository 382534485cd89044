"""aotx.runtime.input_trace: stage stamps for the shared-inputs benchmark's breakdown, off by default."""
from __future__ import annotations

import atexit
import json
import time

from aotx.runtime.input_trace import InputTrace
from aotx.state.derive import operation_id
from aotx.state.ids import IdKind, format_id
from ops.bench.shared_inputs import STAGES, breakdown, trace_key
from ops.bench.stage_trace import read_trace


def test_a_trace_writes_one_line_per_stamp_on_the_monotonic_clock(tmp_path):
    path = tmp_path / "trace.jsonl"
    trace, before = InputTrace(str(path)), time.monotonic()
    trace.stamp(b"\x01" * 16, 7, "begun")
    trace.stamp(b"\x01" * 16, 7, "submitted")
    trace.flush()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["input"], r["stage"]) for r in rows] == [("01" * 16 + "/7", "begun"), ("01" * 16 + "/7", "submitted")]
    assert before <= rows[0]["t"] <= rows[1]["t"] <= time.monotonic()


def test_off_without_a_path_writes_nothing(tmp_path):
    trace = InputTrace(None)
    trace.stamp(b"\x01" * 16, 1, "begun")
    assert not trace.on and list(tmp_path.iterdir()) == []


def test_the_bench_puts_the_servers_stamps_on_each_inputs_time_line(tmp_path):
    lineage = b"\x02" * 16
    op = format_id(IdKind.OPERATION, lineage, operation_id(lineage, 3, b"\x00" * 16))
    assert trace_key(op) == f"{lineage.hex()}/3"
    path = tmp_path / "trace.jsonl"
    trace = InputTrace(str(path))
    trace.stamp(lineage, 3, "begun")
    trace.stamp(lineage, 3, "begun")   # a stage stamped again keeps its first time
    trace.flush()
    stamps = read_trace(path)[trace_key(op)]
    t0 = stamps["begun"] - 0.010
    rows = [{"n": 1, "shared": {"inputs": {trace_key(op): {"t0": t0, "posted": t0 + 0.004, "first_byte": t0 + 0.02}}}}]
    [(n, medians)] = breakdown(rows, read_trace(path))
    assert n == 1 and set(medians) == {"posted", "begun", "first_byte"} <= set(STAGES)
    assert abs(medians["begun"] - 10.0) < 1e-6 and abs(medians["first_byte"] - 20.0) < 1e-6


def test_a_stamp_writes_nothing_until_the_trace_is_flushed_at_exit(tmp_path, monkeypatch):
    """A stamp is kept in memory (no write, no syscall on the event loop, where one lets the engine thread take
    the GIL: the bench's stored responses stamp five stages each and store:false ones none); the lines are
    written when the process exits (atexit), or when many are kept."""
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    path = tmp_path / "trace.jsonl"
    trace = InputTrace(str(path))
    assert registered == [trace.flush]
    for n in range(100):
        trace.stamp_key(f"resp_{n}", "finish_sent")
    assert path.read_text() == ""
    trace.flush()
    assert len(read_trace(path)) == 100
    trace.flush()   # nothing new: nothing written twice
    assert len(path.read_text().splitlines()) == 100
