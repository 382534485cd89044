"""Run scenario steps against the API, checking every answer against the rule model and keeping the ledgers.

The Runner is the driver: it holds the parties, the model and the ledgers, sends mutations and reads,
and runs each step through the steps table (scenarios/steps.py). The jobs it drives live beside it:
the retry policy of unknown outcomes (retry.py), the ledgers of what was acknowledged and what must
still be readable (ledgers.py), receipt and result reads (reads.py), SSE streams (sse.py) and memory
checks (memory_checks.py).

Unknown outcomes (no HTTP answer, 429 journal hold, 503 runtime away) are retried with the exact
same body until a definitive answer or `unknown_deadline_s`; a retried command must then be new
exactly once (201/202) or answer the receipt it got when it landed before the failure (200, same
sequence). Every admitted operation goes into the ledger once; `verify` reads all of them back.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Awaitable, Callable

from . import memory_checks, reads, sse
from .client import BASE, Answer, Party, new_key
from .ledgers import Acknowledged, Results, Sent, receipt_change, same_receipt
from .model import Model
from .retry import UNKNOWN_STATUSES, definitive
from .steps import READ_ONLY, STEPS, WORDS
from .violation import ScenarioViolation, allows, show
from .vocabulary import CANCEL, CONVERSATION, INPUT, MEMBER, NEW_STATUSES, PUBLISH, REGISTER, RETIRE, SPACE

# the callers' names, kept importable from here
__all__ = ["BASE", "UNKNOWN_STATUSES", "WORDS", "Runner", "ScenarioViolation", "Sent", "definitive",
           "receipt_change", "same_receipt"]

_PATHS = {REGISTER: "/participant", RETIRE: "/participant/retirements", SPACE: "/spaces"}
_SPACE_ROUTES = {MEMBER: "members", CONVERSATION: "conversations", PUBLISH: "publications"}
_CON_ROUTES = {INPUT: "inputs", CANCEL: "cancellations"}


class Runner:
    def __init__(self, parties: dict[str, Party], model: Model, *, unknown_deadline_s: float = 0.0,
                 retire_above: int | None = None, lenient_capacity: bool = False,
                 on_unknown: Callable[[str], None] | None = None, crashes: bool = False,
                 model_name: str | None = None, max_output_tokens: int = 6, wait_s: float = 120.0,
                 prompt_tokens: Callable[[str], int] | None = None) -> None:
        """crashes: the runtime may restart without the client knowing (a drill): any unfinished
        input may end `interrupted`; model_name: the model inputs name (default: the first one
        /capabilities lists, read by `sync`); max_output_tokens: of generated inputs;
        prompt_tokens: the prompt length of a text with nothing recalled (the served model's chat
        template), for `wait` steps that say whether the input `recalled` memory."""
        self.parties, self.model = parties, model
        self.unknown_deadline_s = unknown_deadline_s
        self.retire_above = retire_above
        self.lenient_capacity = lenient_capacity
        self.on_unknown = on_unknown
        self.crashes = crashes
        self.model_name = model_name
        self.max_output_tokens = max_output_tokens
        self.wait_s = wait_s
        self.prompt_tokens = prompt_tokens
        self.acknowledged = Acknowledged()   # every new operation once, and the commands as sent
        self.readable = Results()            # every result byte read so far, and each ended result
        self.names: dict[str, str] = {}      # session names -> resources and operations
        self.stats: Counter[str] = Counter()
        self.texts_made = 0                  # generated input texts (each names the next word)

    # the ledgers by their old names
    @property
    def ledger(self) -> dict[str, dict[str, Any]]:
        return self.acknowledged.receipts

    @property
    def sent(self) -> dict[tuple[str, int], Sent]:
        return self.acknowledged.sent

    @property
    def results(self) -> dict[str, bytes]:
        return self.readable.bytes

    @property
    def finals(self) -> dict[str, dict[str, Any]]:
        return self.readable.finals

    # ---- setup -------------------------------------------------------------------------------------
    async def sync(self) -> None:
        """Take each party's lineage, id and counters from the service (a journal may already hold them),
        and from /capabilities whether it runs inputs and keeps memory, and its first model."""
        for name, party in self.parties.items():
            me = await self.definitive(lambda: party.get("/participant"), f"GET /participant as {name}")
            if me.status != 200:
                raise ScenarioViolation(f"GET /participant as {name}: {me.status} {me.body}")
            b = me.body
            party.lineage, party.pid = b["lineage"], b["participant"]
            party.next_sequence, party.retry_floor = int(b["next_sequence"]), int(b["retry_floor"])
            m = self.model.parties[name]
            m.registered, m.pid, m.next, m.floor = b["registered"], b["participant"], party.next_sequence, \
                party.retry_floor
        first = next(iter(self.parties.values()))
        caps = await self.definitive(lambda: first.get("/capabilities"), "GET /capabilities")
        if caps.status == 200 and isinstance(caps.body, dict):
            routes = caps.body.get("routes") or {}
            self.model.execution = bool(routes.get("inputs"))
            self.model.memory_enabled = bool(routes.get("memory"))
            models = caps.body.get("models") or []
            if self.model_name is None and models:
                self.model_name = models[0]["id"]

    def restarted(self) -> None:
        """The client knows the runtime restarted: inputs admitted before it may end `interrupted`."""
        self.model.epoch += 1

    async def definitive(self, call: Callable[[], Awaitable[Answer]], what: str) -> Answer:
        """`call` until a definitive answer, within this runner's deadline for unknown outcomes."""
        return await definitive(call, what, self.unknown_deadline_s, self.stats, self.on_unknown)

    # ---- mutations ---------------------------------------------------------------------------------
    async def mutate(self, actor: str, kind: str, fields: dict[str, Any], *, space: str | None = None,
                     seq: int | None = None, key: str | None = None) -> Answer:
        """`space` is the route's resource: a space, or the conversation of an input or cancellation."""
        party = self.parties[actor]
        seq = party.next_sequence if seq is None else seq
        key = key or new_key()
        if kind in _CON_ROUTES:
            path = f"/conversations/{space}/{_CON_ROUTES[kind]}"
        else:
            path = _PATHS.get(kind) or f"/spaces/{space}/{_SPACE_ROUTES[kind]}"
        sent = Sent(actor, kind, path, fields, space, seq, key, party.body(fields, key=key, sequence=seq))
        return await self.send(sent)

    async def send(self, sent: Sent) -> Answer:
        party, m = self.parties[sent.actor], self.model
        expected = m.predict(sent.actor, sent.kind, sent.fields, sent.seq, sent.key, sent.space, party.lineage)
        before = self.stats["unknown_answers"]
        answer = await self.definitive(lambda: party.post(sent.path, sent.raw),
                                       f"POST {sent.path} as {sent.actor} sequence {sent.seq}")
        unknown = self.stats["unknown_answers"] > before
        what = f"POST {sent.path} as {sent.actor} sequence {sent.seq} ({sent.kind})"
        status = answer.status
        if allows(expected, status):
            self.stats[f"status_{status}"] += 1
            self.stats[f"{sent.kind}_{status}"] += 1
            if not isinstance(expected, int):
                self.stats[f"raced_{sent.kind}_{status}"] += 1
            if status in NEW_STATUSES:
                self._admit(sent, answer.body, what)
            elif status == 200:
                self._retried(sent, answer.body, what)
            return answer
        new = NEW_STATUSES & ({expected} if isinstance(expected, int) else expected)
        if unknown and new and status == 200 and isinstance(answer.body, dict) \
                and answer.body.get("sequence") == str(sent.seq):
            self.stats["landed_before_failure"] += 1    # the lost ack's receipt, found by the exact retry
            self._admit(sent, answer.body, what)
            return answer
        if self.lenient_capacity and new and status == 507:
            self.stats["capacity_refusals"] += 1
            return answer
        raise ScenarioViolation(f"{what}: expected {show(expected)}, got {status} {answer.body}"
                                f"{' (after an unknown outcome)' if unknown else ''}")

    def _retried(self, sent: Sent, body: Any, what: str) -> None:
        r = self.model.parties[sent.actor].receipts[sent.seq]
        if r.body is not None:
            wrong = receipt_change(r.body, body)
            if wrong:
                raise ScenarioViolation(f"{what}: exact retry answered another receipt ({wrong})\n{body}\n{r.body}")
            self.progress(sent.actor, r.body["operation"], body)
        self.stats["exact_retries_same_receipt"] += 1

    def _admit(self, sent: Sent, receipt: dict[str, Any], what: str) -> None:
        op = self.acknowledged.admit(sent, receipt, what)
        self.model.admit(sent.actor, sent.kind, sent.fields, sent.seq, sent.key, receipt, sent.space)
        party = self.parties[sent.actor]
        party.next_sequence = sent.seq + 1
        if sent.kind == RETIRE:
            party.retry_floor = int(sent.fields["retry_floor"])
        if sent.kind == REGISTER:
            party.pid = self.model.parties[sent.actor].pid
        if sent.kind == INPUT:
            self.observe(op, receipt["execution"], what)
        self.stats["acked"] += 1

    # ---- what is seen of inputs ----------------------------------------------------------------------
    def observe(self, op: str, execution: str, what: str) -> None:
        """An execution state seen for input `op`: one the rules allow after what was seen before."""
        wrong = self.model.observe_execution(op, execution, crashes=self.crashes)
        if wrong:
            raise ScenarioViolation(f"{what}: input {op} {wrong}")

    def progress(self, actor: str, op: str, receipt: dict[str, Any]) -> None:
        """A later read of an own receipt: keep the latest (an input's progresses)."""
        i = self.model.inputs.get(op)
        if i is None:
            return
        self.observe(op, receipt["execution"], f"GET /operations/{op} as {actor}")
        r = self.model.parties[actor].receipts.get(i.seq)
        if r is not None:
            r.body = receipt
        self.acknowledged.progressed(op, receipt)

    # ---- reads ---------------------------------------------------------------------------------------
    async def check_read(self, actor: str, path: str, status: int | frozenset[int], body: Any = None) -> Answer:
        party = self.parties[actor]
        got = await self.definitive(lambda: party.get(path), f"GET {path} as {actor}")
        if not allows(status, got.status) or (body is not None and got.body != body):
            raise ScenarioViolation(f"GET {path} as {actor}: expected {show(status)} {body or ''}, got {got.status} "
                                    f"{got.body}")
        self.stats["reads_checked"] += 1
        self.stats[f"read_{got.status}"] += 1
        return got

    async def read_receipt(self, actor: str, op: str) -> Answer:
        return await reads.read_receipt(self, actor, op)

    async def refresh_inputs(self, actor: str) -> None:
        await reads.refresh_inputs(self, actor)

    async def wait_input(self, actor: str, op: str, timeout: float | None = None) -> dict[str, Any]:
        return await reads.wait_input(self, actor, op, timeout)

    async def read_result(self, actor: str, op: str, *, offset: int = 0, limit: int | None = None) -> Answer:
        return await reads.read_result(self, actor, op, offset=offset, limit=limit)

    async def read_events(self, actor: str, op: str, resume: int | None = None) -> Answer:
        return await sse.read_events(self, actor, op, resume)

    async def read_memory(self, actor: str, sid: str, *, details: int = 2) -> tuple[Answer, list[dict[str, Any]]]:
        return await memory_checks.read_memory(self, actor, sid, details=details)

    async def read_memory_object(self, actor: str, obj: str) -> Answer:
        return await memory_checks.read_memory_object(self, actor, obj)

    async def verify(self) -> int:
        """Read every acknowledged receipt and result back (reads.verify); answers the checks made."""
        return await reads.verify(self)

    # ---- steps -------------------------------------------------------------------------------------
    async def run(self, steps: list[dict[str, Any]]) -> None:
        for step in steps:
            await self.run_step(step)

    async def run_step(self, step: dict[str, Any]) -> str:
        """Run one step; answers what it did ("skipped" when its references resolve to nothing).
        A step's `expect` (a status or a list of them) must hold for its main request, and its
        `name` names what it created (or the input it cancelled) for later steps."""
        actor, do = step["actor"], step["do"]
        mp = self.model.parties[actor]
        self.stats[f"step_{do}"] += 1
        if (self.retire_above is not None and mp.registered and len(mp.receipts) > self.retire_above
                and do not in READ_ONLY):
            await self._auto_retire(actor)
        handler = STEPS.get(do)
        if handler is None:
            raise ValueError(f"unknown step {step!r}")
        answer = await handler(self, step, actor)
        if answer is None:
            if "expect" in step:
                raise ScenarioViolation(f"step {step}: its references resolved to nothing")
            self.stats["skipped"] += 1
            return "skipped"
        want = step.get("expect")
        if want is not None and answer.status not in (want if isinstance(want, list) else [want]):
            raise ScenarioViolation(f"step {step}: answered {answer.status} {answer.body}, the scenario expects {want}")
        if "name" in step and answer.status in NEW_STATUSES:
            b = answer.body
            self.names[step["name"]] = b["resource"] if do in ("space", "conversation") else b["operation"]
        return do

    async def _auto_retire(self, actor: str) -> None:
        """Keep the receipt window small: retire up to the oldest input not known to have ended."""
        await self.refresh_inputs(actor)
        party, mp = self.parties[actor], self.model.parties[actor]
        running = [i.seq for i in self.model.inputs_of(actor) if not i.ended and not i.retired]
        floor = min([party.next_sequence, *running])
        if floor > mp.floor:
            await self.mutate(actor, RETIRE, {"retry_floor": str(floor)})
