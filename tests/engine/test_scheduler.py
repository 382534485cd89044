from aotx.engine.block_manager import BlockManager, pages_for
from aotx.engine.detokenizer import Detokenizer
from aotx.engine.scheduler import HEAD_SKIPS, Scheduler
from aotx.engine.sequence import Sequence, SequenceStatus
from aotx.engine.types import SamplingParams

from tests.engine.engine_fakes import FakeTokenizer

PAGE = 4


def make_seq(prompt_len: int, max_tokens: int) -> Sequence:
    return Sequence(
        prompt_ids=list(range(1, prompt_len + 1)),
        params=SamplingParams(max_tokens=max_tokens, temperature=0),
        seed=0, reserved_pages=pages_for(prompt_len + max_tokens, PAGE),
        detokenizer=Detokenizer(FakeTokenizer()),
    )


def advance(out) -> None:
    """What the engine does after a step: tokens are computed, decodes sample one more."""
    for s in out.scheduled:
        s.seq.num_computed += s.num_tokens
        if not s.seq.in_prefill:
            s.seq.output_ids.append(7)


def test_admission_within_lifetime_page_budget_and_fifo():
    bm = BlockManager(num_pages=10, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=1000)
    a, b, c = make_seq(8, 8), make_seq(8, 12), make_seq(2, 2)   # 4, 5, 1 pages
    for s in (a, b, c):
        sched.add(s)
    out = sched.schedule()
    # a fits (4 of 10); b needs 5 more (9) and fits; c needs 1 -> 10 fits
    assert [s.seq for s in out.scheduled] == [a, b, c]
    d = make_seq(2, 2)
    sched.add(d)
    advance(out)
    out = sched.schedule()
    assert d.status is SequenceStatus.WAITING           # no page left to reserve
    assert all(s.is_decode for s in out.scheduled) and len(out.scheduled) == 3
    assert bm.pages_in_use <= sched.reserved_pages <= bm.num_pages
    sched.finish(c, "length")
    out = sched.schedule()
    assert d.status is SequenceStatus.RUNNING and out.scheduled[-1].seq is d


def test_a_head_that_does_not_fit_leaves_free_pages_to_those_behind_it():
    bm = BlockManager(num_pages=6, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=1000)
    running = make_seq(8, 8)                 # 4 pages
    big, small, other = make_seq(8, 4), make_seq(1, 1), make_seq(2, 2)   # 3 pages, 1 page, 1 page
    sched.add(running)
    sched.schedule()
    sched.add(big)
    sched.add(small)
    sched.add(other)
    out = sched.schedule()
    # big needs 3 of the 2 free pages; small and other fit in them: nobody waits beside free pages
    assert [s.seq for s in out.scheduled] == [running, small, other]
    assert list(sched.waiting) == [big]
    advance(out)
    sched.finish(running, "length")
    out = sched.schedule()
    assert big.status is SequenceStatus.RUNNING


def test_a_passed_over_head_is_not_starved():
    """Backfilling stops once the head was passed over HEAD_SKIPS times: the pool drains for it."""
    bm = BlockManager(num_pages=6, page_size=PAGE)
    sched = Scheduler(bm, max_batch=64, prefill_token_budget=1000)
    long_running = make_seq(8, 8)                       # 4 pages for a long time
    sched.add(long_running)
    sched.schedule()
    head = make_seq(8, 4)                               # 3 pages: never fits beside long_running
    sched.add(head)
    admitted = 0
    for step in range(HEAD_SKIPS + 10):
        small = make_seq(1, 1)                          # 1 page each, done after one step
        sched.add(small)
        out = sched.schedule()
        ran = [s.seq for s in out.scheduled if s.seq is small]
        admitted += len(ran)
        for s in ran:
            sched.finish(s, "length")
        if admitted == HEAD_SKIPS:
            break
    assert admitted == HEAD_SKIPS and head.status is SequenceStatus.WAITING
    sched.add(make_seq(1, 1))
    out = sched.schedule()
    assert [s.seq for s in out.scheduled] == [long_running]           # the line now drains for the head
    sched.finish(long_running, "length")
    out = sched.schedule()
    assert out.scheduled[0].seq is head


def test_max_batch_limits_running():
    bm = BlockManager(num_pages=100, page_size=PAGE)
    sched = Scheduler(bm, max_batch=3, prefill_token_budget=1000)
    seqs = [make_seq(3, 3) for _ in range(5)]
    for s in seqs:
        sched.add(s)
    out = sched.schedule()
    assert [s.seq for s in out.scheduled] == seqs[:3]
    assert len(sched.waiting) == 2
    advance(out)
    sched.finish(seqs[0], "stop")
    out = sched.schedule()
    assert [s.seq for s in out.scheduled] == [seqs[1], seqs[2], seqs[3]]
    assert [s.is_decode for s in out.scheduled] == [True, True, False]


def test_long_prompt_is_chunked_and_mixed_with_decodes():
    bm = BlockManager(num_pages=100, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=10)
    short = make_seq(4, 10)
    sched.add(short)
    out = sched.schedule()
    advance(out)
    long = make_seq(25, 2)
    sched.add(long)
    chunks = []
    while long.in_prefill:
        out = sched.schedule()
        assert out.scheduled[0].seq is short and out.scheduled[0].is_decode
        chunks.append(out.scheduled[1].num_tokens)
        assert out.num_prefill_tokens <= 10
        # pages are allocated as the sequence grows, never past what it has computed
        assert bm.capacity(long.seq_id) == pages_for(long.num_computed + chunks[-1], PAGE) * PAGE
        advance(out)
    assert chunks == [10, 10, 5]
    assert len(long.output_ids) == 1     # sampled after the last chunk


def test_cancellation_frees_pages_at_next_step():
    bm = BlockManager(num_pages=20, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=100)
    a, b = make_seq(9, 4), make_seq(3, 3)
    sched.add(a)
    advance(sched.schedule())
    sched.add(b)
    before = bm.pages_in_use
    assert before == 3
    sched.cancel(a.seq_id)
    sched.cancel(b.seq_id)            # cancelled while still waiting
    out = sched.schedule()
    assert out.cancelled == [a, b] and out.scheduled == []
    assert a.finish_reason == "cancelled" and a.is_finished
    assert bm.pages_in_use == 0 and not sched.has_work()


def test_prompt_logprobs_chunks_are_capped():
    from dataclasses import replace

    from aotx.engine.scheduler import PROMPT_LOGPROBS_CHUNK
    bm = BlockManager(num_pages=1000, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=2048)
    seq = make_seq(600, 1)
    seq.params = replace(seq.params, prompt_logprobs=0)
    sched.add(seq)
    sizes = []
    while seq.in_prefill:
        out = sched.schedule()
        sizes.append(out.scheduled[0].num_tokens)
        advance(out)
    assert sizes == [PROMPT_LOGPROBS_CHUNK, PROMPT_LOGPROBS_CHUNK, 600 - 2 * PROMPT_LOGPROBS_CHUNK]


def _at(seq: Sequence, line: float) -> Sequence:
    seq.line = line
    return seq


def test_a_claim_waits_for_earlier_arrivals_only_and_holds_later_ones_back():
    """One FIFO line across engine requests and page claims (shared inputs, before their request
    exists): a claim counts what arrived before it; what arrives after it is admitted only into the
    pages its hold leaves free, so the pool drains to where the claim fits."""
    bm = BlockManager(num_pages=12, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=1000)
    first = _at(make_seq(8, 8), 1.0)                      # 4 pages each
    sched.add(first)
    sched.schedule()
    second, late = _at(make_seq(8, 8), 2.0), _at(make_seq(8, 8), 5.0)
    sched.add(second)
    sched.add(late)
    # ahead of a claim made at 3.0: first (running) and second (waiting) = 8 -> 4 free, 6 wanted
    assert sched.claim(6, since=3.0) is None
    out = sched.schedule()
    assert second.status is SequenceStatus.RUNNING        # it arrived before the claimant
    assert late.status is SequenceStatus.WAITING          # 4 fit, but not beside the 6 held back
    assert all(s.seq is not late for s in out.scheduled)
    advance(out)
    sched.finish(first, "length")
    claim = sched.claim(6, since=3.0)                     # 4 of second + 6 <= 12
    assert claim is not None and sched.claimed_pages == 6
    sched.schedule()
    assert late.status is SequenceStatus.WAITING          # 4 + 6 claimed + 4 > 12
    # the claimant's request takes the claim's pages and its place in the line: ahead of `late`
    mine = make_seq(4, 16)                                # 5 pages <= its 6-page claim
    sched.add(mine, claim=claim)
    assert sched.claimed_pages == 0 and list(sched.waiting) == [mine, late]
    out = sched.schedule()
    assert mine.status is SequenceStatus.RUNNING and late.status is SequenceStatus.WAITING


def test_a_released_claim_or_a_cleared_hold_lets_the_line_move():
    bm = BlockManager(num_pages=8, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=1000)
    claim = sched.claim(6, since=1.0)
    assert claim is not None
    later = _at(make_seq(4, 4), 2.0)                      # 2 pages: fit beside the 6 claimed
    sched.add(later)
    sched.schedule()
    assert later.status is SequenceStatus.RUNNING
    bigger = _at(make_seq(4, 4), 3.0)                     # 2 more: not beside 6 + 2
    sched.add(bigger)
    sched.schedule()
    assert bigger.status is SequenceStatus.WAITING
    sched.release(claim)                                  # its claimant ended without a request
    assert sched.claim(8, since=2.5) is None              # later (running) is ahead: 6 free < 8
    sched.schedule()
    assert sched.hold is not None and bigger.status is SequenceStatus.WAITING   # it arrived after 2.5
    sched.clear_hold()                                    # the claimant left the line
    sched.schedule()
    assert bigger.status is SequenceStatus.RUNNING


def test_a_borrower_uses_its_claimants_pages_which_stay_claimed():
    """A request made for a claimant before its own (a shared input's interpretation) may use the
    claim's pages even when the claim is the whole pool; the claim stays for the claimant's request."""
    bm = BlockManager(num_pages=6, page_size=PAGE)
    sched = Scheduler(bm, max_batch=8, prefill_token_budget=1000)
    claim = sched.claim(6, since=1.0)
    helper = make_seq(8, 8)                               # 4 pages
    sched.add(helper, claim, borrow=True)
    sched.schedule()
    assert helper.status is SequenceStatus.RUNNING and sched.claimed_pages == 6
    sched.finish(helper, "length")
    own = make_seq(8, 12)                                 # 5 pages
    sched.add(own, claim)
    sched.schedule()
    assert own.status is SequenceStatus.RUNNING and sched.claimed_pages == 0
