"""The persistent batch (aotx.engine.slots, ModelRunner._steady_prefix): a step whose decode rows are the
rows the step before sampled is built from that step's arrays, not row by row; the batch it gives is the
one the row-by-row build gives, through arrivals, prefill chunks, page boundaries and finished rows."""
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
    in_flight, steady, rows_seen = None, 0, 0
    for step in range(40):
        for seq in arrivals.get(step, []):
            sched.add(seq)
        out = sched.schedule()
        if not out.scheduled:
            break
        took = runner._steady_prefix(out.scheduled, Head())     # (looks only: the build below takes it)
        steady += took > 0
        plan = runner.build(out.scheduled)
        _same(plan, ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer()).build(out.scheduled))
        rows_seen = max(rows_seen, plan.head)
        # what launch does, then the step before is read (one step behind)
        runner._unread = plan
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
    assert steady >= 10 and rows_seen >= 3, (steady, rows_seen)


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
