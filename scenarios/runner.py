"""Run scenario steps against the API, checking every answer against the rule model and keeping a ledger.

Unknown outcomes (no HTTP answer, 429 journal hold, 503 runtime away) are retried with the exact
same body until a definitive answer or `unknown_deadline_s`; a retried command must then be new
exactly once (201) or answer the receipt it got when it landed before the failure (200, same
sequence). Every admitted operation goes into the ledger once; `verify` reads all of them back.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from .client import Answer, Party, TransportError, new_key
from .model import CONVERSATION, MEMBER, REGISTER, RETIRE, SPACE, Model

UNKNOWN_STATUSES = (429, 503)
_PATHS = {REGISTER: "/participant", RETIRE: "/participant/retirements", SPACE: "/spaces"}


class ScenarioViolation(AssertionError):
    """An answer the rules do not allow."""


@dataclass
class Sent:
    """A mutation as the client sent it (kept to retry it exactly)."""

    actor: str
    kind: str
    path: str
    fields: dict[str, Any]
    space: str | None
    seq: int
    key: str
    raw: bytes


class Runner:
    def __init__(self, parties: dict[str, Party], model: Model, *, unknown_deadline_s: float = 0.0,
                 retire_above: int | None = None, lenient_capacity: bool = False,
                 on_unknown: Callable[[str], None] | None = None) -> None:
        self.parties, self.model = parties, model
        self.unknown_deadline_s = unknown_deadline_s
        self.retire_above = retire_above
        self.lenient_capacity = lenient_capacity
        self.on_unknown = on_unknown
        self.ledger: dict[str, dict[str, Any]] = {}         # operation id -> receipt as acknowledged
        self.sent: dict[tuple[str, int], Sent] = {}          # (actor, sequence) -> the admitted command
        self.stats: Counter[str] = Counter()

    # ---- setup -------------------------------------------------------------------------------------
    async def sync(self) -> None:
        """Take each party's lineage, id and counters from the service (a journal may already hold them)."""
        for name, party in self.parties.items():
            me = await self._definitive(lambda: party.get("/participant"), f"GET /participant as {name}")
            if me.status != 200:
                raise ScenarioViolation(f"GET /participant as {name}: {me.status} {me.body}")
            b = me.body
            party.lineage, party.pid = b["lineage"], b["participant"]
            party.next_sequence, party.retry_floor = int(b["next_sequence"]), int(b["retry_floor"])
            m = self.model.parties[name]
            m.registered, m.pid, m.next, m.floor = b["registered"], b["participant"], party.next_sequence, \
                party.retry_floor

    # ---- the unknown-outcome loop ------------------------------------------------------------------
    async def _definitive(self, call: Callable[[], Any], what: str) -> Answer:
        deadline = time.monotonic() + self.unknown_deadline_s
        delay = 0.02
        while True:
            try:
                answer = await call()
                if answer.status not in UNKNOWN_STATUSES:
                    return answer
                why = f"{answer.status} {answer.body}"
            except TransportError as exc:
                why = str(exc)
            self.stats["unknown_answers"] += 1
            if self.on_unknown:
                self.on_unknown(why)
            if time.monotonic() >= deadline:
                raise ScenarioViolation(f"{what}: no definitive answer within {self.unknown_deadline_s}s: {why}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    # ---- mutations ---------------------------------------------------------------------------------
    async def mutate(self, actor: str, kind: str, fields: dict[str, Any], *, space: str | None = None,
                     seq: int | None = None, key: str | None = None) -> Answer:
        party = self.parties[actor]
        seq = party.next_sequence if seq is None else seq
        key = key or new_key()
        path = _PATHS.get(kind) or f"/spaces/{space}/{'members' if kind == MEMBER else 'conversations'}"
        sent = Sent(actor, kind, path, fields, space, seq, key, party.body(fields, key=key, sequence=seq))
        return await self.send(sent)

    async def send(self, sent: Sent) -> Answer:
        party, m = self.parties[sent.actor], self.model
        expected = m.predict(sent.actor, sent.kind, sent.fields, sent.seq, sent.key, sent.space, party.lineage)
        before = self.stats["unknown_answers"]
        answer = await self._definitive(lambda: party.post(sent.path, sent.raw),
                                        f"POST {sent.path} as {sent.actor} sequence {sent.seq}")
        unknown = self.stats["unknown_answers"] > before
        what = f"POST {sent.path} as {sent.actor} sequence {sent.seq} ({sent.kind})"
        status = answer.status
        if status == expected:
            self.stats[f"status_{status}"] += 1
            if status == 201:
                self._admit(sent, answer.body, what)
            elif status == 200:
                prior = m.parties[sent.actor].receipts[sent.seq].body
                if prior is not None and answer.body != prior:
                    raise ScenarioViolation(f"{what}: exact retry answered another receipt\n{answer.body}\n{prior}")
                self.stats["exact_retries_same_receipt"] += 1
            return answer
        if unknown and expected == 201 and status == 200 and isinstance(answer.body, dict) \
                and answer.body.get("sequence") == str(sent.seq):
            self.stats["landed_before_failure"] += 1    # the lost ack's receipt, found by the exact retry
            self._admit(sent, answer.body, what)
            return answer
        if self.lenient_capacity and expected == 201 and status == 507:
            self.stats["capacity_refusals"] += 1
            return answer
        raise ScenarioViolation(f"{what}: expected {expected}, got {status} {answer.body}"
                                f"{' (after an unknown outcome)' if unknown else ''}")

    def _admit(self, sent: Sent, receipt: dict[str, Any], what: str) -> None:
        op = receipt.get("operation")
        if not isinstance(op, str) or op in self.ledger:
            raise ScenarioViolation(f"{what}: operation {op} was acknowledged before (it appears twice)")
        if receipt.get("sequence") != str(sent.seq):
            raise ScenarioViolation(f"{what}: receipt of sequence {receipt.get('sequence')}")
        self.model.admit(sent.actor, sent.kind, sent.fields, sent.seq, sent.key, receipt, sent.space)
        self.ledger[op] = receipt
        self.sent[(sent.actor, sent.seq)] = sent
        party = self.parties[sent.actor]
        party.next_sequence = sent.seq + 1
        if sent.kind == RETIRE:
            party.retry_floor = int(sent.fields["retry_floor"])
        if sent.kind == REGISTER:
            party.pid = self.model.parties[sent.actor].pid
        self.stats["acked"] += 1

    # ---- steps -------------------------------------------------------------------------------------
    def _pick(self, items: list, index: int):
        return items[index % len(items)] if items else None

    def _live(self, actor: str) -> list[int]:
        return sorted((s for s in self.model.parties[actor].receipts if (actor, s) in self.sent), reverse=True)

    async def run(self, steps: list[dict[str, Any]]) -> None:
        for step in steps:
            await self.run_step(step)

    async def run_step(self, step: dict[str, Any]) -> str:
        """Run one step; answers what it did ("skipped" when its references resolve to nothing)."""
        actor, do = step["actor"], step["do"]
        m, party = self.model, self.parties[actor]
        mp = m.parties[actor]
        self.stats[f"step_{do}"] += 1
        if (self.retire_above is not None and mp.registered and len(mp.receipts) > self.retire_above
                and do not in ("read_space", "read_operation")):
            await self.mutate(actor, RETIRE, {"retry_floor": str(party.next_sequence)})
        spaces = list(m.spaces)
        if do == "register":
            await self.mutate(actor, REGISTER, {})
        elif do == "space":
            await self.mutate(actor, SPACE, {"scope": step.get("scope", "private")})
        elif do == "conversation":
            sid = self._pick(spaces, step.get("space", 0))
            if sid is None:
                return "skipped"
            await self.mutate(actor, CONVERSATION, {}, space=sid)
        elif do == "member":
            sid = self._pick(spaces, step.get("space", 0))
            target = m.parties.get(step.get("target", ""))
            if sid is None or target is None or target.pid is None:
                return "skipped"
            await self.mutate(actor, MEMBER, {"participant": target.pid,
                                              "permissions": list(step.get("permissions", []))}, space=sid)
        elif do in ("retry", "changed"):
            seq = self._pick(self._live(actor), step.get("back", 1) - 1)
            if seq is None:
                return "skipped"
            old = self.sent[(actor, seq)]
            if do == "retry":
                await self.send(old)
            else:  # same sequence and fields, another operation key: other canonical bytes
                await self.mutate(actor, old.kind, old.fields, space=old.space, seq=seq)
        elif do == "future":
            await self.mutate(actor, SPACE, {"scope": "private"}, seq=party.next_sequence + 1)
        elif do == "stale":
            if mp.floor <= 1:
                return "skipped"
            await self.mutate(actor, SPACE, {"scope": "private"}, seq=mp.floor - 1)
        elif do == "retire":
            if not mp.registered:
                return "skipped"
            await self.mutate(actor, RETIRE, {"retry_floor": str(party.next_sequence)})
        elif do == "read_space":
            sid = self._pick(spaces, step.get("space", 0))
            if sid is None:
                return "skipped"
            await self.check_read(actor, f"/spaces/{sid}", m.read_space_status(actor, sid))
        elif do == "read_operation":
            seq = self._pick(self._live(actor), step.get("back", 1) - 1)
            if seq is None:
                return "skipped"
            body = mp.receipts[seq].body
            await self.check_read(actor, f"/operations/{body['operation']}", 200, body)
        else:
            raise ValueError(f"unknown step {step!r}")
        return do

    async def check_read(self, actor: str, path: str, status: int, body: Any = None) -> Answer:
        party = self.parties[actor]
        got = await self._definitive(lambda: party.get(path), f"GET {path} as {actor}")
        if got.status != status or (body is not None and got.body != body):
            raise ScenarioViolation(f"GET {path} as {actor}: expected {status} {body or ''}, got {got.status} "
                                    f"{got.body}")
        self.stats["reads_checked"] += 1
        return got

    # ---- the ledger check --------------------------------------------------------------------------
    async def verify(self) -> int:
        """Every acknowledged receipt identical (410 once retired), counters as the model says."""
        checks = 0
        for name, party in self.parties.items():
            mp = self.model.parties[name]
            me = await self.check_read(name, "/participant", 200)
            want = {"registered": mp.registered, "participant": mp.pid, "next_sequence": str(mp.next),
                    "retry_floor": str(mp.floor)}
            got = {k: me.body[k] for k in want}
            if got != want:
                raise ScenarioViolation(f"{name}: participant {got}, the ledger says {want}")
            checks += 1
            for r in mp.receipts.values():
                if r.body is not None:
                    await self.check_read(name, f"/operations/{r.body['operation']}", 200, r.body)
                    checks += 1
            for op in sorted(mp.retired_ops):
                await self.check_read(name, f"/operations/{op}", 410)
                checks += 1
        return checks
