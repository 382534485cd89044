"""The persistent batch (aotx.engine.slots, ModelRunner._steady_prefix, aotx.engine.decode_prefix): a step
whose decode rows are the rows the step before sampled is scheduled and built from that step's arrays, not
row by row; what it gives is what the row-by-row schedule and build give, through arrivals, prefill chunks,
page boundaries and rows that finished."""
import numpy as np

from aotx.engine.block_manager import BlockManager
from aotx.engine.detokenizer import Detokenizer
from aotx.engine.runner import ModelRunner
from aotx.engine.scheduler import ScheduledSeq, Scheduler
from aotx.engine.sequence import Sequence, SequenceStatus
from aotx.engine.step_rows import Head
from aotx.engine.types import SamplingParams
from tests.engine.engine_fakes import FakeTokenizer

FIELDS = ("token_ids", "positions", "query_start", "context_lens", "block_tables", "slot_mapping", "logits_rows")


def _seq(prompt: int, max_tokens: int) -> Sequence:
    return Sequence(prompt_ids=list(range(3, 3 + prompt)), params=SamplingParams(max_tokens=max_tokens), seed=1,
                    reserved_pages=0, detokenizer=Detokenizer(FakeTokenizer()))


def _same(plan, ref) -> None:
    for name in FIELDS:
        a, b = getattr(plan.batch, name), getattr(ref.batch, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), (name, a, b)
    assert [(r, q.seq_id) for r, q in plan.sample] == [(r, q.seq_id) for r, q in ref.sample]
    assert (plan.prev_rows is None) == (ref.prev_rows is None)
    if plan.prev_rows is not None:
        assert np.array_equal(plan.prev_rows, ref.prev_rows)
    assert plan.pending_token == ref.pending_token and plan.head == ref.head


def test_steady_steps_build_the_batch_the_row_by_row_build_does():
    blocks = BlockManager(num_pages=256, page_size=4)
    sched = Scheduler(blocks, max_batch=8, prefill_token_budget=6)
    runner = ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer())
    arrivals = {0: [_seq(5, 9), _seq(3, 14)], 3: [_seq(9, 6)], 7: [_seq(2, 11), _seq(4, 3)], 12: [_seq(1, 5)]}
    in_flight, steady, rows_seen, carried = None, 0, 0, 0
    taken = []
    take = sched.prefix.take
    sched.prefix.take = lambda *a: taken.append(take(*a)) or taken[-1]
    for step in range(40):
        for seq in arrivals.get(step, []):
            sched.add(seq)
        out = sched.schedule()
        if not out.scheduled:
            break
        carried += sched.prefix.seqs != [] and out.decodes > 0 and taken[-1] > 0
        # the decode rows the row-by-row schedule gives, each with a page for its position
        want = [q for q in sched.running if q.num_computed >= len(q.prompt_ids)
                and len(q.prompt_ids) + len(q.output_ids) + q.pending - q.num_computed == 1
                and len(q.output_ids) + q.pending < q.params.max_tokens]
        assert [r.seq for r in out.scheduled[:out.decodes]] == want
        for q in want:
            assert len(blocks.block_table(q.seq_id)) * 4 > q.num_computed
        took = runner._steady_prefix(out.scheduled, Head())     # (looks only: the build below takes it)
        steady += took > 0
        plan = runner.build(out.scheduled)
        _same(plan, ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer()).build(out.scheduled))
        rows_seen = max(rows_seen, plan.head)
        # what launch does, then the step before is read (one step behind)
        runner._unread = plan
        sched.launched()
        for s in out.scheduled:
            s.seq.num_computed += s.num_tokens
        for i, (_, seq) in enumerate(plan.sample):
            seq.pending += 1
            seq.pending_row = i
        if in_flight is not None:
            for _, seq in in_flight.sample:
                seq.pending -= 1
                if seq.status is not SequenceStatus.FINISHED:
                    seq.output_ids.append(7)
                    if len(seq.output_ids) >= seq.params.max_tokens:
                        sched.finish(seq, "length")
        in_flight = plan
    assert steady >= 10 and rows_seen >= 3 and carried >= 10, (steady, rows_seen, carried)


def test_a_slot_is_reused_after_its_sequence_finished_and_holds_only_the_new_pages():
    blocks = BlockManager(num_pages=64, page_size=4)
    runner = ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer())
    runner._slots.__init__(capacity=1, width=1)
    a = _seq(9, 4)
    blocks.ensure_capacity(a.seq_id, 9)
    runner.build([ScheduledSeq(a, 9, False)])
    a.status = SequenceStatus.FINISHED
    blocks.free(a.seq_id)
    b, c = _seq(2, 4), _seq(6, 4)
    for s in (b, c):
        blocks.ensure_capacity(s.seq_id, len(s.prompt_ids))
    batch = runner.build([ScheduledSeq(b, 2, False), ScheduledSeq(c, 6, False)]).batch
    assert b.slot == a.slot        # reclaimed; c's slot is a new one (the table grew)
    assert batch.block_tables.tolist() == [blocks.block_table(b.seq_id) + [-1], blocks.block_table(c.seq_id)]


async def test_staggered_requests_through_the_steady_path_get_the_reference_tokens():
    """One step behind with a device thread: requests arrive while others decode (each after an earlier one's
    third token) and end at different steps; every token is the reference's (the fake backend reads its
    context back from the paged KV: a wrong slot or table shows), every delta is a whole Delta."""
    import asyncio
    import dataclasses

    from aotx.engine import Delta, Engine, EngineConfig
    from tests.engine.engine_fakes import FakeBackend, reference_greedy

    backend = FakeBackend(num_pages=400, page_size=4)
    engine = Engine(backend, FakeTokenizer(), EngineConfig(num_pages=400, page_size=4, max_model_len=256,
                                                           overlap=True))
    engine.start()
    prompts = [list(f"request {i} says".encode()) for i in range(10)]
    budgets = [9, 23, 5, 17, 30, 2, 12, 19, 7, 26]
    got: dict[int, list[Delta]] = {}

    async def run(i: int, after: asyncio.Event | None, third: asyncio.Event) -> None:
        if after is not None:
            await after.wait()
        got[i] = []
        async for d in engine.submit(prompts[i], SamplingParams(max_tokens=budgets[i], temperature=0)):
            got[i].append(d)
            if sum(len(x.token_ids) for x in got[i]) >= min(3, budgets[i]):
                third.set()
    try:
        thirds = [asyncio.Event() for _ in prompts]
        await asyncio.gather(*(run(i, thirds[i - 1] if i else None, thirds[i]) for i in range(len(prompts))))
    finally:
        await engine.stop()
    for i, deltas in got.items():
        assert [t for d in deltas for t in d.token_ids] == reference_greedy(prompts[i], budgets[i])
        assert deltas[-1].finish_reason == "length" and deltas[-1].completion_tokens == budgets[i]
        for d in deltas:
            assert d == Delta(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Delta)})
    assert engine.stats().max_batch_width >= 3
