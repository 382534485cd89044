import threading

from aotx.engine.stats import Histogram, StatsCollector


def test_histogram_buckets_are_cumulative_le():
    h = Histogram((0.1, 0.5, 1.0))
    for v in (0.05, 0.1, 0.3, 0.7, 3.0):
        h.observe(v)
    snap = h.snapshot()
    assert snap.counts == (2, 3, 4) and snap.count == 5
    assert abs(snap.sum - 4.15) < 1e-9


def test_collector_counts_and_widths_thread_safe():
    c = StatsCollector(kv_pages_total=10)

    def work():
        for i in range(1000):
            c.step(decode_rows=i % 7, prompt_tokens=1)
            c.token(ttft=0.01 if i == 0 else None, itl=None if i == 0 else 0.02)
            c.finished("stop")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c.set_gauges(running=3, pages_in_use=5)
    s = c.snapshot(queue_depth=2)
    assert s.steps_total == 4000 and s.prompt_tokens_total == 4000 and s.generation_tokens_total == 4000
    assert s.max_batch_width == 6 and s.requests_finished_total == {"stop": 4000}
    assert s.time_to_first_token.count == 4 and s.inter_token_latency.count == 3996
    assert (s.queue_depth, s.running, s.kv_pages_in_use, s.kv_pages_total) == (2, 3, 5, 10)
