"""What the stateful HTTP machines share: a scenarios Runner driven on the machine's own event loop, and the
journal-core rules (DESIGN §5) that both run through their own `step()`.

Hypothesis orders a machine's rules by name and argument count, not by where they are defined, so a rule
inherited from here draws exactly as one written in the machine itself.
"""
from __future__ import annotations

import asyncio
from collections import Counter

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from hypothesis.strategies import SearchStrategy

index = st.integers(0, 50)
scopes = st.sampled_from(("private", "room", "instance"))
permissions = st.lists(st.sampled_from(("read", "write", "manage")), unique=True, max_size=3)


class RunnerMachine(RuleBasedStateMachine):
    """A machine whose `runner` (a scenarios Runner, set up by the first `_open()`) speaks HTTP on this
    machine's event loop. `seen` counts the answers over all examples. Each machine defines `step(**step)`
    (run one scenario step) and `_close()` (end its app or stack), which the rules and teardown call."""

    seen: Counter[str]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.runner = None
        self.restarts = 0

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        if self.runner is not None:
            self.seen.update(self.runner.stats)
        self.seen["restarts"] += self.restarts
        try:
            self._close()
        finally:
            self.loop.close()


def journal_core_rules(actors: SearchStrategy[str], back: SearchStrategy[int]) -> type[RunnerMachine]:
    """A RunnerMachine with the journal-core rules both machines run, drawing actors from `actors` and how
    far back a retry reaches from `back`."""

    class JournalCoreRules(RunnerMachine):
        @rule(actor=actors, scope=scopes)
        def create_space(self, actor, scope):
            self.step(actor=actor, do="space", scope=scope)

        @rule(actor=actors, space=index)
        def create_conversation(self, actor, space):
            self.step(actor=actor, do="conversation", space=space)

        @rule(actor=actors, space=index, member=actors, perms=permissions)
        def set_member(self, actor, space, member, perms):
            self.step(actor=actor, do="member", space=space, target=member, permissions=perms)

        @rule(actor=actors, back=back)
        def exact_retry(self, actor, back):
            self.step(actor=actor, do="retry", back=back)

        @rule(actor=actors)
        def retire(self, actor):
            self.step(actor=actor, do="retire")

    return JournalCoreRules
