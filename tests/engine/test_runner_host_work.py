"""The host side of a step costs nothing proportional to a sequence's context: a decode step of a
sequence holding thousands of pages copies its block table from an array kept up to date, it does
not rebuild it from the page list."""
import time

import numpy as np

from aotx.engine.block_manager import BlockManager
from aotx.engine.detokenizer import Detokenizer
from aotx.engine.runner import ModelRunner
from aotx.engine.scheduler import ScheduledSeq
from aotx.engine.sequence import Sequence
from aotx.engine.types import SamplingParams
from tests.engine.engine_fakes import FakeTokenizer


def _decoding(blocks, context: int) -> Sequence:
    seq = Sequence(prompt_ids=[7] * context, params=SamplingParams(max_tokens=10, temperature=0), seed=1,
                   reserved_pages=0, detokenizer=Detokenizer(FakeTokenizer()))
    seq.num_computed = context - 1
    blocks.ensure_capacity(seq.seq_id, context)
    return seq


def _build_cost(context: int) -> float:
    """The cheapest of 30 builds of one decode step (seconds): the least noisy on a busy box."""
    blocks = BlockManager(num_pages=8192, page_size=16)
    runner = ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer())
    seq = _decoding(blocks, context)
    step = [ScheduledSeq(seq, 1, is_decode=True)]
    first = runner.build(step).batch
    assert first.block_tables.tolist() == [blocks.block_table(seq.seq_id)]
    best = float("inf")
    for _ in range(30):
        t0 = time.perf_counter()
        batch = runner.build(step).batch
        best = min(best, time.perf_counter() - t0)
    assert np.array_equal(batch.block_tables, first.block_tables)
    return best


def test_a_decode_step_of_a_long_context_costs_what_a_short_one_does():
    # 8000 pages (128k tokens) against 4: a page-list conversion would make it ~100x dearer
    short, long = _build_cost(4 * 16), _build_cost(8000 * 16)
    assert long < 5 * short, (short, long)


def test_block_tables_follow_growth_and_frees():
    blocks = BlockManager(num_pages=64, page_size=4)
    runner = ModelRunner(backend=None, blocks=blocks, tokenizer=FakeTokenizer())
    a, b = _decoding(blocks, 9), _decoding(blocks, 3)
    for _ in range(12):
        for s in (a, b):
            blocks.ensure_capacity(s.seq_id, s.num_computed + 1)
        batch = runner.build([ScheduledSeq(a, 1, True), ScheduledSeq(b, 1, True)]).batch
        width = max(len(blocks.block_table(a.seq_id)), len(blocks.block_table(b.seq_id)))
        for row, s in zip(batch.block_tables.tolist(), (a, b)):
            t = blocks.block_table(s.seq_id)
            assert row == t + [-1] * (width - len(t))
        a.num_computed += 1
        b.num_computed += 1
        a.prompt_ids.append(1)
        b.prompt_ids.append(1)
    blocks.free(b.seq_id)
    c = _decoding(blocks, 5)        # gets b's pages: its table is its own
    batch = runner.build([ScheduledSeq(c, 1, True)]).batch
    assert batch.block_tables.tolist() == [blocks.block_table(c.seq_id)]
