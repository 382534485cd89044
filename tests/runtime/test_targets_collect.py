"""A coalescing sink (the split deployment's announcer) gathers, message by message, exactly what merging each
message's Targets would give it: `collect(applied, out, deltas=False, where)` against
`out.merge(targets_of(applied) + where, deltas=False)`, over every applied message of a log with every kind of
transfer (registrations, spaces, members, conversations, inputs with output and completion, memory, a
publication, a cancellation, retirements, control records, stored records). And the change feed tells a
coalescing sink what it told the same sink as a plain one."""

from __future__ import annotations

from aotx.runtime.observers import Applied
from aotx.runtime.replay import Projector
from aotx.runtime.targets import ChangeFeed, Targets, collect, targets_of
from tests.snapshot.journal import INCARNATION, SOURCE, rich_log


def _applied():
    b = rich_log()
    p = Projector(SOURCE, INCARNATION)
    for subject, seq, data in b.messages:
        yield Applied(subject, seq, tuple(p.feed(subject, seq, data)))
    yield Applied("s", 10 ** 6, ())


def _fields(t: Targets) -> tuple:
    return t.ops, t.deltas, t.conversations, t.floors, t.spaces, t.everyone, t.where


def test_collect_gathers_what_merging_each_messages_targets_gathers():
    within = object()
    merged, gathered = Targets(), Targets()
    kinds = set()
    for applied in _applied():
        one = targets_of(applied)
        if one.spaces:
            one.where = within
        merged.merge(one, deltas=False)
        assert collect(applied, gathered, False, within) is bool(one), applied.seq
        assert _fields(gathered) == _fields(merged), applied.seq
        kinds |= {t.kind for t in applied.transfers}
        fresh = Targets()   # with deltas: targets_of's own answer
        collect(applied, fresh, True)
        assert _fields(fresh) == _fields(targets_of(applied))
    assert len(kinds) >= 8 and merged.ops and merged.floors and merged.spaces and merged.conversations


class Gather:
    def __init__(self) -> None:
        self.targets, self.woken = Targets(), 0

    def pending(self) -> Targets:
        return self.targets

    def due(self) -> None:
        self.woken += 1


def test_the_feed_tells_a_coalescing_sink_what_it_told_a_plain_one():
    plain, gather = Targets(), Gather()
    feed = ChangeFeed(lambda: None)
    calls = []
    feed.add(lambda t: (calls.append(1), plain.merge(t, deltas=False)))
    feed.add_coalescing(gather)
    for applied in _applied():
        feed(applied)
    feed.everyone()
    assert _fields(gather.targets)[:6] == _fields(plain)[:6] and gather.woken == len(calls) > 10
    feed.remove_coalescing(gather)
    feed(Applied("s", 1, ()))
    feed.everyone()
    assert gather.woken == len(calls) - 1
