"""Replay = live for the stored projector, through the real SharedRuntime on a real nats-server (hypothesis).

Random sequences of stored commands of several identities — valid and invalid, in concurrent batches
that share group-commit rounds, with the clock moving past the retention limits — are recorded live,
each answer checked against the pure core (decide/apply in the same order, tests/stored/helpers.Store).
Then the log alone replayed afresh gives the live state hash, and a boot from a snapshot plus its tail
gives the same state hash as a boot by full replay (both after closing what the run left unfinished).
No @seed: each run draws new examples (tests/conftest.py profiles; `ci` bounds the count).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass, fields, replace

from hypothesis import HealthCheck, example, given, settings, strategies as st

from aotx.runtime import SharedRuntime
from aotx.runtime.boot import replay
from aotx.snapshot import SnapshotPolicy
from aotx.state import state_hash
from aotx.stored import (AddConversationItems, AppendKeyAnswer, AppendResponseEvents, BeginKey, CancelResponse,
                         CreateConversation, CreateResponse, DeleteConversation, DeleteConversationItem,
                         DeleteResponse, Expire, FinishKey, FinishResponse, KeyEnd, Reason, ResponseStatus, Saved,
                         StoredLimits, StoredRefusal, UpdateConversation, identity_of_key, interruptions,
                         stored_digest)
from eventlog import StreamSpec
from tests.stored.helpers import Store, call, call_output, cid, message, rid

T0 = 1_800_000_000
IDENTITIES = ("alice", "bob", identity_of_key("sk-carol"))
D0, D1 = (hashlib.sha256(bytes([n])).digest() for n in range(2))    # request body digests
LIMITS = StoredLimits(responses=3, conversations=3, keys=3, items_per_conversation=6, bytes=6000,
                      command_bytes=2000, idempotency_ttl=20, response_ttl=45)
_names = itertools.count(1)
NEXT = -1   # an append's `first`: the count saved when it is decided (resolved on the pure core)
NOW = -1    # a created_at: the clock when it is sent
SEEN: Counter[str] = Counter()   # over all examples: the run must reach the interesting answers

ids = st.integers(1, 3)
firsts = st.sampled_from((NEXT, NEXT, NEXT, 0, 1))   # mostly: continue at the saved count
identities = st.sampled_from(IDENTITIES[:1] * 5 + IDENTITIES)   # mostly one, so that ids meet
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
item_n = st.integers(1, 40)
items = st.lists(st.one_of(st.builds(message, item_n, texts), st.builds(call, item_n),
                           st.builds(call_output, item_n)), max_size=3)
metadata = st.dictionaries(st.sampled_from(("topic", "user", "big")), texts, max_size=2)
events = st.lists(st.binary(max_size=40), min_size=1, max_size=3)

surfaces = st.sampled_from(("chat.completions", "responses"))
keys = st.sampled_from(("k1", "k2"))
maybe = lambda s: st.none() | s   # noqa: E731 — a strategy of s or None



@dataclass(frozen=True)
class Existing:
    """An id of one of the identity's records when the command is sent (the `n`-th, modulo their count),
    or, when it has none, the id `fallback` (then unknown): so that commands meet the records they name."""

    table: str
    n: int
    fallback: str

    def resolve(self, book) -> str:
        have = list(getattr(book, self.table))
        return have[self.n % len(have)] if have else self.fallback


def named(table: str, make) -> st.SearchStrategy:
    existing = st.builds(Existing, st.just(table), st.integers(0, 3), st.builds(make, ids))
    return st.one_of(st.builds(make, ids), existing, existing)


responses, conversations = named("responses", rid), named("conversations", cid)
# what a response continues: mostly nothing, else a previous response, a conversation, or (refused) both
links = st.tuples(st.sampled_from("....pcb"), responses, conversations).map(
    lambda t: {".": {}, "p": {"previous_response_id": t[1]}, "c": {"conversation": t[2]},
               "b": {"previous_response_id": t[1], "conversation": t[2]}}[t[0]])
create_response = st.builds(
    lambda link, **kw: CreateResponse(**kw, **link), links, response_id=st.builds(rid, st.integers(1, 6)),
    created_at=st.just(NOW), model=st.just("m"), input=items, instructions=maybe(texts), metadata=metadata,
    background=st.booleans())
append_events = st.builds(AppendResponseEvents, responses, firsts, events)
finish_response = st.builds(FinishResponse, responses, st.sampled_from([s for s in ResponseStatus if s.terminal]),
                            items, usage=maybe(st.just({"total_tokens": 3})))
create_conversation = st.builds(CreateConversation, st.builds(cid, st.integers(1, 4)), st.just(NOW), metadata, items)
begin_key = st.builds(BeginKey, surfaces, keys, st.sampled_from((D0, D1)), bound=maybe(responses))
append_answer = st.builds(AppendKeyAnswer, surfaces, keys, firsts, events)
# weighted (one_of picks a branch uniformly): records are made, continued and finished more than removed
commands = st.one_of(
    create_response, create_response, create_response, create_response, create_response, append_events, append_events, append_events,
    finish_response, finish_response, st.builds(CancelResponse, responses), st.builds(DeleteResponse, responses),
    create_conversation, create_conversation, st.builds(AddConversationItems, conversations, items),
    st.builds(DeleteConversationItem, conversations, st.builds(lambda n: message(n, "")["id"], item_n)),
    st.builds(UpdateConversation, conversations, metadata), st.builds(DeleteConversation, conversations),
    begin_key, begin_key, begin_key, append_answer, append_answer,
    st.builds(FinishKey, surfaces, keys, st.sampled_from((200, 400)), end=st.sampled_from(KeyEnd)),
    st.builds(Expire))
steps = st.lists(st.tuples(identities, commands), min_size=3, max_size=10)   # one concurrent batch
runs = st.lists(st.tuples(st.integers(0, 30), steps), min_size=4, max_size=10)  # (seconds later, batch)


def resolved(model: Store, identity: str, cmd):
    """`cmd` with an append's NEXT replaced by the count the pure core has saved now, NOW by the clock."""
    book = model.state.book(identity)
    cmd = replace(cmd, **{f.name: getattr(cmd, f.name).resolve(book) for f in fields(cmd)
                          if isinstance(getattr(cmd, f.name), Existing)})
    if getattr(cmd, "created_at", None) == NOW:
        return replace(cmd, created_at=model.now)
    if isinstance(cmd, AppendResponseEvents) and cmd.first == NEXT:
        r = book.responses.get(cmd.response_id)
        return replace(cmd, first=len(r.events) if r else 0)
    if isinstance(cmd, AppendKeyAnswer) and cmd.first == NEXT:
        k = book.keys.get((cmd.surface, cmd.key))
        return replace(cmd, first=len(k.chunks) if k else 0)
    return cmd


def comparable(out):
    """An answer of the runtime or of the pure core, as the two can be compared."""
    if isinstance(out, StoredRefusal):
        return ("refused", out.reason, out.message, out.param)
    assert isinstance(out, Saved), out
    return ("saved", out.events, out.key)


def hash_of(projector) -> str:
    """What SharedRuntime.state_hash computes, of a projector (a replay's)."""
    text = f"{state_hash(projector.state)}:{projector.memory.digest()}"
    if projector.stored.books:
        text += f":{stored_digest(projector.stored)}"
    return hashlib.blake2b(text.encode(), digest_size=32).hexdigest()


async def record_replay_boot(url: str, run: list, every: int) -> None:
    n = next(_names)
    sp = StreamSpec(name=f"STREPLAY{n}", subject_prefix=f"strp{n}.j")
    clock = [float(T0)]

    async def start(**kw) -> SharedRuntime:
        return await SharedRuntime(url, sp, progress=False, probe_interval=0.05, stored_limits=LIMITS,
                                   clock=lambda: clock[0], **kw).start()

    model = Store(limits=LIMITS)
    rt = await start(snapshots=SnapshotPolicy(every=every))
    try:
        for later, batch in run:
            clock[0] += later
            model.now = int(clock[0])
            expected, sent = [], []
            for identity, cmd in batch:     # the pure core, in the order the round decides them
                sent.append((identity, resolved(model, identity, cmd)))
                expected.append(model.do(*sent[-1]))
            outs = await asyncio.gather(*(rt.stored.record(identity, cmd) for identity, cmd in sent))
            assert list(map(comparable, outs)) == list(map(comparable, expected)), batch
            SEEN.update(f"{type(cmd).__name__}:{o.reason.word if isinstance(o, StoredRefusal) else 'saved'}"
                        for (_, cmd), o in zip(batch, outs))
            SEEN["full"] += any(isinstance(o, StoredRefusal) and o.reason is Reason.FULL for o in outs)
            SEEN["expired"] += any(isinstance(c, Expire) and o.events for (_, c), o in zip(batch, outs))
        assert stored_digest(rt.projector.stored) == stored_digest(model.state)
        await rt.snapshots.settled()
        snapshotted, live = rt.snapshots.stats.saved, rt.state_hash()
        SEEN["snapshotted"] += snapshotted > 0
        SEEN["interrupted"] += bool(interruptions(rt.projector.stored))
        assert hash_of(await replay(rt.recorder, progress=False)) == live        # a fresh replay
    finally:
        await rt.stop()
    fast = await start(snapshots=SnapshotPolicy(every=every))
    try:
        assert (fast.snapshots.stats.booted_from is not None) == (snapshotted > 0)
        booted = fast.state_hash()
    finally:
        await fast.stop()
    full = await start()                   # full replay, after what `fast` journalled at its boot
    try:
        assert full.state_hash() == booted
        assert hash_of(await replay(full.recorder, progress=False)) == booted
    finally:
        await full.stop()


A, B = IDENTITIES[:2]
# one explicit case (hypothesis runs it first, then draws new ones) that surely gives every answer SEEN asks for
EVERYTHING = [
    (0, [(A, CreateResponse(rid(1), NOW, "m", [message(1, "a")])), (A, BeginKey("responses", "k1", D0)),
         (A, CreateConversation(cid(1), NOW, {"topic": "x"}, [message(5, "c")])),
         (A, AppendResponseEvents(rid(1), NEXT, [b"e0"])), (A, AppendResponseEvents(rid(1), 0, [b"again"])),
         (A, AppendKeyAnswer("responses", "k1", NEXT, [b"{}"]))]),
    (1, [(A, FinishResponse(rid(1), ResponseStatus.COMPLETED, [message(2, "b", "assistant")])),
         (A, FinishKey("responses", "k1", 200)), (A, BeginKey("responses", "k1", D1)),
         (A, AddConversationItems(cid(1), [call(3), call_output(3)])), (B, CreateResponse(rid(2), NOW, "m", [])),
         (A, CreateResponse(rid(3), NOW, "m", [], previous_response_id=rid(1))),
         (A, CreateResponse(rid(4), NOW, "m", [])), (A, CreateResponse(rid(5), NOW, "m", [], conversation=cid(9)))]),
    (50, [(A, Expire()), (B, Expire())])]


def test_stored_replay_equals_live_and_a_snapshot_boot_equals_a_full_replay(nats_url):
    # each example boots three runtimes on a real nats-server: 1/4 of the profile's count (50 dev, 25 ci)
    @settings(max_examples=max(settings.default.max_examples // 4, 5), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(run=runs, every=st.integers(2, 9))
    @example(run=EVERYTHING, every=2)
    def check(run, every):
        asyncio.run(record_replay_boot(nats_url, run, every))

    check()
    print(dict(sorted(SEEN.items())))
    for what in ("CreateResponse:saved", "AppendResponseEvents:saved", "FinishResponse:saved", "BeginKey:saved",
                 "CreateConversation:saved", "AddConversationItems:saved", "AppendKeyAnswer:saved", "FinishKey:saved",
                 "CreateResponse:unknown", "AppendResponseEvents:out_of_order", "BeginKey:mismatch", "expired",
                 "full", "snapshotted", "interrupted"):
        assert SEEN[what] > 0, (what, dict(SEEN))
