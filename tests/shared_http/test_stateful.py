"""Hypothesis stateful test of /aotx/v1/shared over HTTP (Quart test client) against a real nats-server.

Every answer is checked against scenarios.Model (the rules of DESIGN §5): same retry → same receipt,
409/410 exactly per the retry table, 404 for a space the actor cannot read (never 403), 403 for a
missing right in a readable space. `restart` boots a new runtime from the same stream: its state hash
equals the live one and every acknowledged receipt reads back identical.
"""
from __future__ import annotations

import itertools
import secrets
from collections import Counter

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule, run_state_machine_as_test
from quart import Quart

from api.shared import attach_shared, token_sha256
from aotx.runtime import SharedRuntime
from eventlog import StreamSpec
from scenarios import Model, Party, QuartTransport, Runner
from scenarios.model import REGISTER, RETIRE, SPACE

from .core_rules import index, journal_core_rules, scopes

ACTORS = ("alice", "bob", "carol")
ALL = {"shared_read", "shared_write", "shared_manage"}
TOKENS = {n: f"tok-{n}-{secrets.token_hex(16)}" for n in ACTORS}
PRINCIPALS = {token_sha256(TOKENS[n]): (n, ALL) for n in ACTORS}
_streams = itertools.count(1)
SEEN: Counter[str] = Counter()   # answers over all examples: the run must reach every row of the table

actors = st.sampled_from(ACTORS)
back = st.integers(1, 6)


class SharedHttpMachine(journal_core_rules(actors, back)):
    nats_url = ""
    seen = SEEN

    def __init__(self) -> None:
        super().__init__()
        n = next(_streams)
        self.spec = StreamSpec(name=f"HTTPPROP{n}", subject_prefix=f"hp{n}.j")
        self.model = Model(list(ACTORS))
        self.runner: Runner | None = None
        self.app_cm = None
        self.steps = 0              # steps run since the boot or the last restart

    def _open(self) -> None:
        self.runtime = SharedRuntime(self.nats_url, self.spec, progress=False)
        app = Quart("shared-http-prop")
        attach_shared(app, self.runtime, PRINCIPALS)
        self.app_cm = app.test_app()
        test_app = self.run(self.app_cm.__aenter__())
        transport = QuartTransport(test_app.test_client())
        parties = {n: Party(n, TOKENS[n], transport) for n in ACTORS}
        if self.runner is None:
            self.runner = Runner(parties, self.model)
        else:  # the client keeps its ledger and counters across the restart
            for name, party in parties.items():
                old = self.runner.parties[name]
                party.lineage, party.pid = old.lineage, old.pid
                party.next_sequence, party.retry_floor = old.next_sequence, old.retry_floor
            self.runner.parties = parties

    def _close(self) -> None:
        if self.app_cm is not None:
            self.run(self.app_cm.__aexit__(None, None, None))
            self.app_cm = None

    @initialize()
    def boot(self) -> None:
        """A runtime on a new stream; alice and bob registered, alice's instance space and bob's private one.
        carol registers through the rules (until then her commands answer 409)."""
        self._open()
        self.run(self.runner.sync())
        for name in ("alice", "bob"):
            self.step(actor=name, do="register", expect=201)
        self.step(actor="alice", do="space", scope="instance", expect=201)
        self.step(actor="bob", do="space", scope="private", expect=201)
        self.steps = 0

    def step(self, **step) -> None:
        self.steps += 1
        self.run(self.runner.run_step(step))

    @rule(actor=actors)
    def register(self, actor):
        self.step(actor=actor, do="register")

    # create_space, create_conversation, set_member, exact_retry and retire: journal_core_rules
    @rule(actor=actors, back=back)
    def changed_key(self, actor, back):
        self.step(actor=actor, do="changed", back=back)

    @rule(actor=actors, back=back, scope=scopes)
    def changed_fields(self, actor, back, scope):
        """Same sequence and operation key, other fields: 409 unless they resolve to the same input."""
        live = sorted(self.runner.model.parties[actor].receipts, reverse=True)
        live = [s for s in live if (actor, s) in self.runner.sent]
        if not live:
            return
        old = self.runner.sent[(actor, live[(back - 1) % len(live)])]
        if old.kind == REGISTER:  # no fields to change
            return
        if old.kind == SPACE:
            fields = {**old.fields, "scope": scope}
        elif old.kind == RETIRE:
            fields = {"retry_floor": str(int(old.fields["retry_floor"]) + 1)}
        elif "permissions" in old.fields:
            fields = {**old.fields, "permissions": sorted(set(old.fields["permissions"]) ^ {"read"})}
        else:
            fields = {**old.fields, "id": secrets.token_hex(16)}
        self.run(self.runner.mutate(actor, old.kind, fields, space=old.space, seq=old.seq, key=old.key))

    @rule(actor=actors)
    def stale_sequence(self, actor):
        """A sequence below the actor's retry floor: 410 (a registered actor that never retired retires first)."""
        if self.runner.model.parties[actor].floor <= 1:
            self.step(actor=actor, do="retire")
        self.step(actor=actor, do="stale")

    @rule(actor=actors)
    def future_sequence(self, actor):
        self.step(actor=actor, do="future")

    @rule(actor=actors, space=index)
    def read_space(self, actor, space):
        self.step(actor=actor, do="read_space", space=space)

    @rule(actor=actors, back=back)
    def read_operation(self, actor, back):
        self.step(actor=actor, do="read_operation", back=back)

    @rule(pick=index)
    def mutate_without_the_right(self, pick):
        """A registered actor writes in a space it lacks a right in: 404 where it cannot read the space
        (never 403), 403 where it reads it but lacks write (a conversation) or manage (a member row)."""
        m = self.runner.model
        cases = [(name, i, sid) for name, p in m.parties.items() if p.registered for i, sid in enumerate(m.spaces)
                 if not {"write", "manage"} <= m.rights(name, sid)]
        if not cases:
            return
        name, i, sid = cases[pick % len(cases)]
        if "write" not in m.rights(name, sid):
            self.step(actor=name, do="conversation", space=i, expect=404 if "read" not in m.rights(name, sid) else 403)
        else:
            self.step(actor=name, do="member", space=i, target=name, permissions=["read"], expect=403)

    @precondition(lambda self: self.steps >= 5)
    @rule()
    def restart(self):
        live = self.runtime.state_hash()
        self._close()
        self._open()
        assert self.runtime.state_hash() == live
        self.run(self.runner.verify())
        self.restarts += 1
        self.steps = 0

    @invariant()
    def runtime_healthy(self):
        if self.app_cm is not None:
            assert self.runtime.failed is None and not self.runtime.hold.active

    @invariant()
    def private_spaces_hidden(self):
        """Nobody without a row or ownership reads a private or room space (404, never 403)."""
        if self.app_cm is None:
            return
        m = self.runner.model
        for sid, space in list(m.spaces.items())[-2:]:
            for name in ACTORS:
                if space.scope != "instance" and name != space.owner and not m.spaces[sid].members.get(name):
                    self.run(self.runner.check_read(name, f"/spaces/{sid}", 404))


def test_shared_api_against_the_rule_model(nats_url):
    SharedHttpMachine.nats_url = nats_url
    # examples: 2/5 of the profile's (40 in ci, 80 in dev); each one boots a runtime on a new stream
    run_state_machine_as_test(SharedHttpMachine, settings=settings(
        max_examples=settings.default.max_examples * 2 // 5, stateful_step_count=40, deadline=None,
        suppress_health_check=list(HealthCheck)))
    print(dict(sorted(SEEN.items())))
    for what in ("status_200", "status_201", "status_403", "status_404", "status_409", "status_410",
                 "exact_retries_same_receipt", "restarts"):
        assert SEEN[what] > 0, (what, SEEN)
