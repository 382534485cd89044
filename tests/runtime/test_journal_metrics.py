"""The journal's and the requests' prometheus collectors read what happened: an append's ack or its error,
a hold begun and lifted, replay progress; a request's queue time, first token, later tokens and end, by its
surface and lane only."""
from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aotx.engine.types import Delta
from aotx.request_latency import RequestLatency
from aotx.runtime.hold import HoldStatus
from aotx.runtime.journal_metrics import JournalMetrics


def _samples(collector) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_appends_errors_holds_and_replay_progress():
    hold = HoldStatus()
    metrics = JournalMetrics(hold, lambda: 7)
    with metrics.timed("batch", 5):
        pass
    with pytest.raises(OSError):
        with metrics.timed("single", 1):
            raise OSError("disk")
    metrics.replay_progress(40, 100)
    hold.begin("full", "byte cap", pending_bytes=300)
    got = _samples(metrics)
    assert got[("aotx_journal_appended_messages_total", (("path", "batch"),))] == 5
    assert got[("aotx_journal_appended_messages_total", (("path", "single"),))] == 0
    assert got[("aotx_journal_append_ack_seconds_count", (("path", "batch"),))] == 1
    assert got[("aotx_journal_append_errors_total", (("path", "single"),))] == 1
    assert got[("aotx_journal_hold", (("reason", "full"),))] == 1 and got[("aotx_journal_hold", (("reason", "unavailable"),))] == 0
    assert got[("aotx_journal_holds_total", ())] == 1 and got[("aotx_journal_pending_bytes", ())] == 300
    assert got[("aotx_journal_replay_messages", ())] == 40 and got[("aotx_journal_replay_total_messages", ())] == 100
    assert got[("aotx_journal_applied_sequence", ())] == 7
    hold.lift()
    assert _samples(metrics)[("aotx_journal_hold", (("reason", "full"),))] == 0


def test_a_request_is_timed_in_its_own_cell_only():
    latency = RequestLatency()
    on = latency.observer("responses", "stream")
    on(Delta("a", (1,), queued_s=0.25))
    on(Delta("bc", (2, 3)))
    on(Delta("", (), finish_reason="stop"))
    got = _samples(latency)
    cell = (("lane", "stream"), ("surface", "responses"))
    assert got[("aotx_request_queue_seconds_count", cell)] == 1 and got[("aotx_request_queue_seconds_sum", cell)] == 0.25
    assert got[("aotx_request_time_to_first_token_seconds_count", cell)] == 1
    assert got[("aotx_request_inter_token_latency_seconds_count", cell)] == 2   # two tokens after the first
    assert got[("aotx_request_duration_seconds_count", cell)] == 1
    others = [v for (name, labels), v in got.items() if name.endswith("_count") and labels != cell]
    assert len(others) == 4 * (5 * 2 - 1) and not any(others)   # every other cell there, and still 0
    with pytest.raises(ValueError):
        latency.observer("gpt-4o", "stream")   # a model name is never a label


def test_the_append_figures_are_exposed_as_prometheus_client_exposed_them():
    """The append figures are plain numbers now (JournalMetrics._PathFigures): the exposition is the one
    prometheus_client's Counter and Histogram children gave for the same appends — every HELP and TYPE line,
    every sample name, label and value (a sum to within the few µs each ack's own timing adds)."""
    from prometheus_client import Counter, Histogram
    from aotx.runtime.journal_metrics import ACK_BUCKETS, PATHS

    ref = CollectorRegistry(auto_describe=False)
    appends = Counter("aotx_journal_appended_messages", "Journal messages the log acknowledged, by append path.",
                      ("path",), registry=ref)
    errors = Counter("aotx_journal_append_errors", "Appends (or batches) that failed or were refused.",
                     ("path",), registry=ref)
    ack = Histogram("aotx_journal_append_ack_seconds",
                    "One append or one atomic batch to its ack (the log's fsync included).",
                    ("path",), buckets=ACK_BUCKETS, registry=ref)
    for path in PATHS:
        appends.labels(path), errors.labels(path), ack.labels(path)
    metrics = JournalMetrics(HoldStatus(), lambda: 0)
    # latencies well inside their buckets (the call's own microseconds cannot move them), one past the last
    for path, messages, took in (("single", 1, 0.0001), ("single", 1, 0.003), ("batch", 16, 0.07),
                                 ("single", 1, 0.0007), ("batch", 3, 7.0), ("single", 1, 0.0031)):
        metrics.acked(path, messages, time.perf_counter() - took)
        appends.labels(path).inc(messages)
        ack.labels(path).observe(took)
    for path in ("single", "batch", "single"):
        metrics.failed(path)
        errors.labels(path).inc()

    def text(registry) -> list[str]:
        return [line for line in generate_latest(registry).decode().splitlines()
                if "_created" not in line and "_sum" not in line]
    ours = CollectorRegistry(auto_describe=False)
    ours.register(metrics)
    assert [line for line in text(ours) if "journal_append" in line] == text(ref)
    sums = {tuple(s.labels.items()): s.value for s in metrics.ack_metric().samples if s.name.endswith("_sum")}
    assert sums[(("path", "single"),)] == pytest.approx(0.0069, abs=1e-3)
    assert sums[(("path", "batch"),)] == pytest.approx(7.07, abs=1e-3)
