"""The one-step-behind loop (aotx.engine.launch) over FakeBackend: step N+1 is launched before step
N is read back, and whatever a stop makes it compute in excess never reaches the caller."""
import asyncio

import pytest

from aotx.engine import Engine, EngineConfig, SamplingParams
from aotx.engine.launch import InlineLauncher, ThreadLauncher
from tests.engine.engine_fakes import FakeBackend, FakeTokenizer, reference_greedy
from tests.waiting import wait_until_async


class Recording:
    """Wraps a launcher; records launches and id reads in the order they happen."""

    def __init__(self, inner) -> None:
        self.inner, self.events, self.overlaps = inner, [], inner.overlaps

    def launch(self, batch, prev_rows, sample_rows, sampling):
        n = sum(1 for e in self.events if e[0] == "launch") + 1
        self.events.append(("launch", n, None if prev_rows is None else int((prev_rows >= 0).sum())))
        handle = self.inner.launch(batch, prev_rows, sample_rows, sampling)
        events = self.events

        class Handle:
            logits = property(lambda _: handle.logits)

            def ids(self):
                events.append(("read", n))
                return handle.ids()
        return Handle()

    def close(self):
        self.inner.close()


def engine_with(backend, launcher, overlap=True, **cfg):
    config = EngineConfig(**{"num_pages": 64, "page_size": 4, "max_model_len": 256, "overlap": overlap, **cfg})
    engine = Engine(backend, FakeTokenizer(), config, launcher=launcher)
    engine.start()
    return engine


async def collect(handle):
    return [d async for d in handle]


@pytest.mark.parametrize("device", ["inline", "thread"])
async def test_step_n_plus_1_is_launched_before_step_n_is_read(device):
    backend = FakeBackend(num_pages=64, page_size=4)
    launcher = Recording(InlineLauncher(backend) if device == "inline" else ThreadLauncher(backend))
    engine = engine_with(backend, launcher)
    try:
        prompt = list(b"overlap")
        deltas = await collect(engine.submit(prompt, SamplingParams(max_tokens=4, temperature=0)))
        assert [t for d in deltas for t in d.token_ids] == reference_greedy(prompt, 4)
    finally:
        await engine.stop()
    # prefill samples token 1; three decodes each take the id sampled by the step before on the device
    assert launcher.events == [("launch", 1, None), ("launch", 2, 1), ("read", 1), ("launch", 3, 1),
                               ("read", 2), ("launch", 4, 1), ("read", 3), ("read", 4)]
    assert backend.forward_calls == 4                # max_tokens is exact: no step past the budget
    assert all(-1 not in b.token_ids for b in backend.batches)   # every placeholder was resolved


async def test_the_classic_loop_reads_every_step_before_the_next():
    backend = FakeBackend(num_pages=64, page_size=4)
    launcher = Recording(InlineLauncher(backend))
    engine = engine_with(backend, launcher, overlap=False)
    try:
        await collect(engine.submit(list(b"classic"), SamplingParams(max_tokens=3, temperature=0)))
    finally:
        await engine.stop()
    assert launcher.events == [("launch", 1, None), ("read", 1), ("launch", 2, None), ("read", 2),
                               ("launch", 3, None), ("read", 3)]


@pytest.mark.parametrize("device", ["inline", "thread"])
async def test_a_stop_computes_one_token_that_nobody_sees(device):
    prompt = list(b"stop test")
    ref = reference_greedy(prompt, 12)
    stop_token = ref[4]
    backend = FakeBackend(num_pages=64, page_size=4)
    engine = engine_with(backend, InlineLauncher(backend) if device == "inline" else ThreadLauncher(backend))
    try:
        deltas = await collect(engine.submit(prompt, SamplingParams(max_tokens=12, temperature=0,
                                                                    stop_token_ids=(stop_token,))))
        ids = [t for d in deltas for t in d.token_ids]
        assert ids == ref[: ref.index(stop_token) + 1]
        assert deltas[-1].finish_reason == "stop" and deltas[-1].completion_tokens == len(ids)
        stats = await wait_until_async(lambda: engine.stats(), "the stopped request's pages to return",
                                       done=lambda st: st.kv_pages_in_use == 0)
        assert stats.generation_tokens_total == len(ids)          # the extra token is not counted
        assert stats.inter_token_latency.count == len(ids) - 1
        # ... but it was computed: one forward past the stop (the device thread may still be on it)
        await wait_until_async(lambda: backend.forward_calls, "the step past the stop to run",
                               done=lambda n: n >= len(ids) + 1)
        assert backend.forward_calls == len(ids) + 1
        # a stop string in the middle of a batch of streams: the others are unaffected
        text = bytes(ref).decode()
        handles = [engine.submit(prompt, SamplingParams(max_tokens=12, temperature=0, stop=(text[5:7],))),
                   engine.submit(prompt, SamplingParams(max_tokens=12, temperature=0))]
        cut, full = await asyncio.gather(*(collect(h) for h in handles))
        assert "".join(d.text for d in cut) == text[: text.index(text[5:7])]
        assert cut[-1].finish_reason == "stop" and cut[-1].completion_tokens == sum(len(d.token_ids) for d in cut)
        assert [t for d in full for t in d.token_ids] == ref and full[-1].completion_tokens == 12
    finally:
        await engine.stop()


async def test_seeded_streams_match_the_classic_loop_token_for_token():
    prompts = [list(f"stream {i} says".encode()) for i in range(6)]
    params = [SamplingParams(max_tokens=10 + i, temperature=0.8, seed=i, stop=("qq",) if i % 2 else ())
              for i in range(6)]
    outputs = {}
    for overlap in (False, True):
        backend = FakeBackend(num_pages=200, page_size=4)
        engine = engine_with(backend, ThreadLauncher(backend) if overlap else InlineLauncher(backend),
                             overlap=overlap, num_pages=200)
        try:
            handles = [engine.submit(p, sp) for p, sp in zip(prompts, params)]
            results = await asyncio.gather(*(collect(h) for h in handles))
        finally:
            await engine.stop()
        outputs[overlap] = [([t for d in r for t in d.token_ids], "".join(d.text for d in r),
                             r[-1].finish_reason, r[-1].completion_tokens) for r in results]
    assert outputs[True] == outputs[False]


async def test_cancellation_while_a_step_is_in_flight():
    import threading

    release, entered = threading.Event(), threading.Event()

    class Gated(FakeBackend):
        def forward(self, batch):
            if self.forward_calls >= 3:
                entered.set()
                assert release.wait(60), "the test never released the device"
            return super().forward(batch)

    backend = Gated(num_pages=64, page_size=4)
    engine = engine_with(backend, ThreadLauncher(backend))
    try:
        h = engine.submit(list(b"long running"), SamplingParams(max_tokens=200, temperature=0))
        other = engine.submit(list(b"neighbour"), SamplingParams(max_tokens=6, temperature=0))
        first = await h.__anext__()
        await asyncio.to_thread(entered.wait, 60)     # step 4 is on the device now
        h.cancel()
        release.set()
        rest = await collect(h)
        assert rest[-1].finish_reason == "cancelled"
        delivered = len(first.token_ids) + sum(len(d.token_ids) for d in rest)
        assert rest[-1].completion_tokens == delivered
        assert [t for d in await collect(other) for t in d.token_ids] == reference_greedy(list(b"neighbour"), 6)
        stats = await wait_until_async(lambda: engine.stats(), "the cancelled request's pages to return",
                                       done=lambda st: st.kv_pages_in_use == 0 and st.running == 0)
        assert stats.generation_tokens_total == delivered + 6
    finally:
        release.set()
        await engine.stop()


@pytest.mark.parametrize("overlap", [False, True])
async def test_stats_report_device_busy_time_and_decode_width(overlap):
    import time

    class Slow(FakeBackend):
        def forward(self, batch):
            t0 = time.perf_counter()
            out = super().forward(batch)
            while time.perf_counter() - t0 < 0.002:   # a device step of at least 2 ms
                pass
            return out

    backend = Slow(num_pages=64, page_size=4)
    engine = engine_with(backend, ThreadLauncher(backend) if overlap else InlineLauncher(backend), overlap=overlap)
    try:
        handles = [engine.submit(list(f"busy {i}".encode()), SamplingParams(max_tokens=6, temperature=0))
                   for i in range(3)]
        await asyncio.gather(*(collect(h) for h in handles))
        stats = engine.stats()
    finally:
        await engine.stop()
    assert stats.device_busy_s >= 0.002 * backend.forward_calls
    assert stats.device_idle_s >= 0.0
    assert stats.decode_rows_total >= 3 * 5 and stats.decode_steps_total >= 5
