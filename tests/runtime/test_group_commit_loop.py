"""The group-commit loop (aotx.runtime.group_commit) on its own: what queues while a round is in
flight forms the next round, handed-back items go first, a failing round fails only its items."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from aotx.runtime.group_commit import GroupCommit, answer
from tests.waiting import wait_until_async


@dataclass(eq=False)
class Item:
    name: str
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Rounds:
    """A round function that records its batches and can be held open until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.again: dict[str, int] = {}   # name -> times it is handed back
        self.fail: set[str] = set()

    async def __call__(self, batch: list[Item]):
        self.batches.append([i.name for i in batch])
        await self.gate.wait()
        if self.fail & {i.name for i in batch}:
            raise ValueError("round failed (test)")
        back = [i for i in batch if self.again.get(i.name, 0) > 0]
        for i in back:
            self.again[i.name] -= 1
        answer([i for i in batch if i not in back], "ok")
        return back


async def test_items_queued_during_a_round_form_the_next_one_within_max_batch():
    rounds = Rounds()
    commit = GroupCommit(asyncio.Lock(), rounds, name="test", max_batch=2)
    rounds.gate.clear()
    first = asyncio.ensure_future(commit.submit(Item("a")))
    await wait_until_async(lambda: rounds.batches == [["a"]], "the first round to start")
    rest = [asyncio.ensure_future(commit.submit(Item(n))) for n in "bcd"]
    await wait_until_async(lambda: len(commit) == 3, "three items to queue")
    rounds.gate.set()
    assert await asyncio.gather(first, *rest) == ["ok"] * 4
    assert rounds.batches == [["a"], ["b", "c"], ["d"]]


async def test_handed_back_items_go_first_in_the_next_round_in_their_order():
    rounds = Rounds()
    rounds.again = {"a": 1, "b": 1}
    commit = GroupCommit(asyncio.Lock(), rounds, name="test")
    rounds.gate.clear()
    futs = [asyncio.ensure_future(commit.submit(Item(n))) for n in "abc"]
    await wait_until_async(lambda: rounds.batches == [["a", "b", "c"]], "the first round to start")
    late = asyncio.ensure_future(commit.submit(Item("d")))
    await wait_until_async(lambda: len(commit) == 1, "d to queue")
    rounds.gate.set()
    assert await asyncio.gather(*futs, late) == ["ok"] * 4
    assert rounds.batches == [["a", "b", "c"], ["a", "b", "d"]]


async def test_a_failing_round_fails_its_items_and_the_loop_goes_on():
    rounds = Rounds()
    rounds.fail = {"bad"}
    commit = GroupCommit(asyncio.Lock(), rounds, name="test")
    rounds.gate.clear()
    bad = asyncio.ensure_future(commit.submit(Item("bad")))
    await wait_until_async(lambda: rounds.batches == [["bad"]], "the failing round to start")
    good = asyncio.ensure_future(commit.submit(Item("good")))
    await wait_until_async(lambda: len(commit) == 1, "the next item to queue")
    rounds.gate.set()
    with pytest.raises(ValueError):
        await bad
    assert await good == "ok"


async def test_rounds_of_two_loops_take_turns_on_one_lock_and_stop_answers_what_is_queued():
    lock = asyncio.Lock()
    rounds = Rounds()
    commit, other = GroupCommit(lock, rounds, name="one"), GroupCommit(lock, Rounds(), name="two")
    rounds.gate.clear()
    first = asyncio.ensure_future(commit.submit(Item("a")))
    await wait_until_async(lambda: lock.locked(), "the first round to hold the lock")
    blocked = asyncio.ensure_future(other.submit(Item("x")))
    queued = asyncio.ensure_future(commit.submit(Item("b")))
    await wait_until_async(lambda: len(commit) == 1, "b to queue")
    assert not blocked.done()        # the other loop waits for the lock
    await commit.stop("stopped")
    assert first.cancelled() and await queued == "stopped"
    assert await blocked == "ok"     # the lock is free again
