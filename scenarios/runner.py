"""Run scenario steps against the API, checking every answer against the rule model and keeping a ledger.

Unknown outcomes (no HTTP answer, 429 journal hold, 503 runtime away) are retried with the exact
same body until a definitive answer or `unknown_deadline_s`; a retried command must then be new
exactly once (201/202) or answer the receipt it got when it landed before the failure (200, same
sequence). Every admitted operation goes into the ledger once; `verify` reads all of them back.

Inputs add a result ledger: every byte of a result read (by offset, or through the operation's
SSE stream resumed by Last-Event-ID) must agree with every byte read before — across restarts
and resumes — and a terminal result never changes. Memory listings are checked for visibility
(a row is listed only in its owner space or with instance scope), for at most one retained text
per input operation, and for the text of every completed input once it completed.
"""
from __future__ import annotations

import asyncio
import base64
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from .client import Answer, Party, TransportError, new_key, parse_sse
from .model import (CANCEL, CONVERSATION, INPUT, MEMBER, NEW_STATUSES, PUBLISH, READ, REGISTER, RETIRE, SPACE,
                    TERMINAL, Model, memory_object)

UNKNOWN_STATUSES = (429, 503)
BASE = "/aotx/v1/shared"
_PATHS = {REGISTER: "/participant", RETIRE: "/participant/retirements", SPACE: "/spaces"}
_SPACE_ROUTES = {MEMBER: "members", CONVERSATION: "conversations", PUBLISH: "publications"}
_CON_ROUTES = {INPUT: "inputs", CANCEL: "cancellations"}
# receipt fields of an input that never change; the rest (execution, lease, output, result) only progress
_STABLE = ("operation", "sequence", "kind", "resource", "command_bytes", "model_digest", "page_limit", "event_cursor")
_RANK = {"queued": 0, "running": 1}
WORDS = ("river", "copper", "lantern", "harbour", "orchard", "comet", "violin", "granite", "meadow", "falcon",
         "saffron", "glacier", "tulip", "compass", "ember", "willow")


class ScenarioViolation(AssertionError):
    """An answer the rules do not allow."""


def receipt_change(prior: dict[str, Any], got: dict[str, Any]) -> str | None:
    """What is wrong with `got` as a later read of the receipt `prior`, or None. Other receipts never
    change; an input's may only progress (queued → running → one terminal state, output growing)."""
    if prior == got:
        return None
    if not isinstance(got, dict) or "execution" not in prior or "execution" not in got:
        return "the receipt changed"
    for key in _STABLE:
        if prior.get(key) != got.get(key):
            return f"{key} changed from {prior.get(key)!r} to {got.get(key)!r}"
    if prior["execution"] in TERMINAL:
        return f"a terminal ({prior['execution']}) receipt changed"
    if _RANK.get(got["execution"], 2) < _RANK.get(prior["execution"], 2):
        return f"execution went back from {prior['execution']} to {got['execution']}"
    if got["output_bytes"] < prior["output_bytes"]:
        return f"saved output shrank from {prior['output_bytes']} to {got['output_bytes']} bytes"
    if prior["cancel_requested"] and not got["cancel_requested"]:
        return "a cancellation request vanished"
    if prior["lease"] is not None and got["lease"] != prior["lease"]:
        return f"the lease changed from {prior['lease']} to {got['lease']}"
    return None


def same_receipt(prior: dict[str, Any], got: dict[str, Any]) -> bool:
    """`got` is the receipt `prior` read again: identical, or an input's that only progressed."""
    return receipt_change(prior, got) is None


def _allows(expected: int | frozenset[int], status: int) -> bool:
    return status == expected if isinstance(expected, int) else status in expected


def _show(expected: int | frozenset[int]) -> str:
    return str(expected) if isinstance(expected, int) else "one of " + "/".join(map(str, sorted(expected)))


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


async def definitive(call: Callable[[], Any], what: str, deadline_s: float, stats: Counter,
                     on_unknown: Callable[[str], None] | None = None) -> Answer:
    """Call until the answer is definitive (not 429/503, no transport error), backing off from 20 ms
    to 0.5 s; each unknown answer counts in stats["unknown_answers"]; past `deadline_s` a violation."""
    deadline = time.monotonic() + deadline_s
    delay = 0.02
    while True:
        try:
            answer = await call()
            if answer.status not in UNKNOWN_STATUSES:
                return answer
            why = f"{answer.status} {answer.body}"
        except TransportError as exc:
            why = str(exc)
        stats["unknown_answers"] += 1
        if on_unknown:
            on_unknown(why)
        if time.monotonic() >= deadline:
            raise ScenarioViolation(f"{what}: no definitive answer within {deadline_s}s: {why}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


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
        self.ledger: dict[str, dict[str, Any]] = {}         # operation id -> receipt as acknowledged
        self.sent: dict[tuple[str, int], Sent] = {}          # (actor, sequence) -> the admitted command
        self.results: dict[str, bytes] = {}                  # input operation -> result bytes read so far
        self.finals: dict[str, dict[str, Any]] = {}          # input operation -> its terminal summary
        self.names: dict[str, str] = {}                      # session names -> resources and operations
        self.stats: Counter[str] = Counter()
        self._texts = 0

    # ---- setup -------------------------------------------------------------------------------------
    async def sync(self) -> None:
        """Take each party's lineage, id and counters from the service (a journal may already hold them),
        and from /capabilities whether it runs inputs and keeps memory, and its first model."""
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
        first = next(iter(self.parties.values()))
        caps = await self._definitive(lambda: first.get("/capabilities"), "GET /capabilities")
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

    # ---- the unknown-outcome loop ------------------------------------------------------------------
    async def _definitive(self, call: Callable[[], Any], what: str) -> Answer:
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
        answer = await self._definitive(lambda: party.post(sent.path, sent.raw),
                                        f"POST {sent.path} as {sent.actor} sequence {sent.seq}")
        unknown = self.stats["unknown_answers"] > before
        what = f"POST {sent.path} as {sent.actor} sequence {sent.seq} ({sent.kind})"
        status = answer.status
        if _allows(expected, status):
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
        raise ScenarioViolation(f"{what}: expected {_show(expected)}, got {status} {answer.body}"
                                f"{' (after an unknown outcome)' if unknown else ''}")

    def _retried(self, sent: Sent, body: Any, what: str) -> None:
        r = self.model.parties[sent.actor].receipts[sent.seq]
        if r.body is not None:
            wrong = receipt_change(r.body, body)
            if wrong:
                raise ScenarioViolation(f"{what}: exact retry answered another receipt ({wrong})\n{body}\n{r.body}")
            self._progress(sent.actor, r.body["operation"], body)
        self.stats["exact_retries_same_receipt"] += 1

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
        if sent.kind == INPUT:
            self._observe(op, receipt["execution"], what)
        self.stats["acked"] += 1

    # ---- what is seen of inputs ----------------------------------------------------------------------
    def _observe(self, op: str, execution: str, what: str) -> None:
        wrong = self.model.observe_execution(op, execution, crashes=self.crashes)
        if wrong:
            raise ScenarioViolation(f"{what}: input {op} {wrong}")

    def _progress(self, actor: str, op: str, receipt: dict[str, Any]) -> None:
        """A later read of an own receipt: keep the latest (an input's progresses)."""
        i = self.model.inputs.get(op)
        if i is None:
            return
        self._observe(op, receipt["execution"], f"GET /operations/{op} as {actor}")
        r = self.model.parties[actor].receipts.get(i.seq)
        if r is not None:
            r.body = receipt
        self.ledger[op] = receipt

    async def refresh_inputs(self, actor: str) -> None:
        """Read the receipt of every own input not known to have ended."""
        for i in self.model.inputs_of(actor):
            if not i.ended and not i.retired:
                await self.read_receipt(actor, i.op)

    async def read_receipt(self, actor: str, op: str) -> Answer:
        expected = self.model.read_operation_status(actor, op)
        got = await self.check_read(actor, f"/operations/{op}", expected)
        if got.status == 200:
            i = self.model.inputs.get(op)
            own = i is not None and i.actor == actor or i is None
            if (got.body["sequence"] is None) == own:
                raise ScenarioViolation(f"GET /operations/{op} as {actor}: sequence {got.body['sequence']!r} "
                                        f"({'own' if own else 'foreign'} receipt)")
            if own:
                seq = int(got.body["sequence"])
                prior = self.model.parties[actor].receipts[seq].body
                wrong = receipt_change(prior, got.body) if prior is not None else None
                if wrong:
                    raise ScenarioViolation(f"GET /operations/{op} as {actor}: {wrong}\n{got.body}\n{prior}")
                self._progress(actor, op, got.body)
            elif i is not None:
                self._observe(op, got.body["execution"], f"GET /operations/{op} as {actor}")
        return got

    async def wait_input(self, actor: str, op: str, timeout: float | None = None) -> dict[str, Any]:
        """Poll the receipt until the input ends; answers the ended receipt."""
        deadline = time.monotonic() + (self.wait_s if timeout is None else timeout)
        i = self.model.inputs[op]
        if i.retired:   # its receipt is gone (it had ended): what was last seen of it
            return {"operation": op, "execution": i.execution, "result": None}
        reader = actor if self.model.read_operation_status(actor, op) == 200 else i.actor
        while True:
            got = await self.read_receipt(reader, op)
            if got.status != 200:
                raise ScenarioViolation(f"waiting for {op} as {reader}: {got.status} {got.body}")
            if got.body["execution"] in TERMINAL:
                return got.body
            if time.monotonic() > deadline:
                raise ScenarioViolation(f"input {op} did not end within the wait: {got.body['execution']}")
            await asyncio.sleep(0.05)

    def _span(self, op: str, what: str, body: dict[str, Any]) -> None:
        """One result span read: its bytes agree with every byte read of this result before."""
        data = base64.b64decode(body["bytes"])
        offset = int(body["offset"])
        if len(data) != body["byte_length"] or body["next_offset"] != offset + len(data):
            raise ScenarioViolation(f"{what}: span of {len(data)} bytes reports byte_length {body['byte_length']}, "
                                    f"next_offset {body['next_offset']}")
        if body["saved_bytes"] < body["next_offset"]:
            raise ScenarioViolation(f"{what}: next_offset {body['next_offset']} beyond saved {body['saved_bytes']}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if body["text"] != text:
            raise ScenarioViolation(f"{what}: text {body['text']!r} for bytes {data!r}")
        self._bytes(op, what, offset, data)
        self._observe(op, body["execution"], what)
        if body["execution"] in TERMINAL and body["next_offset"] == body["saved_bytes"]:
            self._final(op, what, {k: body[k] for k in ("execution", "saved_bytes", "input_tokens", "output_tokens",
                                                        "finish")})

    def _bytes(self, op: str, what: str, offset: int, data: bytes) -> None:
        seen = self.results.get(op, b"")
        if offset > len(seen):
            raise ScenarioViolation(f"{what}: read at {offset} past the {len(seen)} bytes read before (a gap)")
        overlap = seen[offset:offset + len(data)]
        if data[:len(overlap)] != overlap:
            raise ScenarioViolation(f"{what}: bytes at {offset} differ from what was read before: {data!r} vs "
                                    f"{overlap!r}")
        if offset + len(data) > len(seen) or op not in self.results:
            self.results[op] = seen[:offset] + data if offset + len(data) > len(seen) else seen
        fin = self.finals.get(op)
        if fin is not None and len(self.results[op]) > fin["saved_bytes"]:
            raise ScenarioViolation(f"{what}: more bytes than the {fin['saved_bytes']} of the ended result")

    def _final(self, op: str, what: str, summary: dict[str, Any]) -> None:
        prior = self.finals.setdefault(op, summary)
        if prior != summary:
            raise ScenarioViolation(f"{what}: the ended result changed: {summary} vs {prior}")
        if len(self.results.get(op, b"")) != summary["saved_bytes"]:
            raise ScenarioViolation(f"{what}: ended with {summary['saved_bytes']} bytes, read "
                                    f"{len(self.results.get(op, b''))}")

    async def read_result(self, actor: str, op: str, *, offset: int = 0, limit: int | None = None) -> Answer:
        """GET /operations/{op}/result from `offset` to the end saved now (pages of `limit` bytes)."""
        expected = self.model.read_result_status(actor, op)
        first = None
        offset = min(offset, len(self.results.get(op, b"")))
        while True:
            q = f"?offset={offset}" + ("" if limit is None else f"&limit={limit}")
            got = await self.check_read(actor, f"/operations/{op}/result{q}", expected)
            first = first or got
            if got.status != 200:
                return got
            self._span(op, f"GET /operations/{op}/result{q} as {actor}", got.body)
            self.stats["result_spans_checked"] += 1
            if got.body["next_offset"] >= got.body["saved_bytes"]:
                return first
            offset = got.body["next_offset"]

    async def read_events(self, actor: str, op: str, resume: int | None = None) -> Answer:
        """GET /operations/{op}/events (SSE) to its end, resumed by Last-Event-ID at byte `resume`."""
        expected = self.model.read_result_status(actor, op)
        headers = None
        if resume is not None:
            resume = min(resume, len(self.results.get(op, b"")))
            headers = {"Last-Event-ID": f"{BASE}/operations/{op}/events@{resume}"}
        what = f"GET /operations/{op}/events as {actor}" + (f" from {resume}" if resume is not None else "")
        party = self.parties[actor]
        got = await self._definitive(lambda: party.get(f"/operations/{op}/events", headers), what)
        if not _allows(expected, got.status):
            raise ScenarioViolation(f"{what}: expected {_show(expected)}, got {got.status} {got.body}")
        self.stats["reads_checked"] += 1
        if got.status != 200:
            return got
        events = parse_sse(got.body)
        at = resume or 0
        for e in events:
            if e["event"] == "output":
                d = e["data"]
                if d["offset"] != at:
                    raise ScenarioViolation(f"{what}: output at {d['offset']}, expected {at}")
                data = base64.b64decode(d["bytes"])
                self._bytes(op, what, at, data)
                at += len(data)
                if e.get("id") != f"{BASE}/operations/{op}/events@{at}":
                    raise ScenarioViolation(f"{what}: event id {e.get('id')!r} after byte {at}")
            elif e["event"] == "end":
                d = e["data"]
                self._observe(op, d["execution"], what)
                self._final(op, what, {k: d[k] for k in ("execution", "saved_bytes", "input_tokens", "output_tokens",
                                                         "finish")})
            elif e["event"] == "error":
                # rights or membership went away during the stream: only then may it end this way
                if self.model.read_result_status(actor, op) == 200:
                    raise ScenarioViolation(f"{what}: the stream ended with {e['data']} while still readable")
        if not events or events[-1]["event"] not in ("end", "error"):
            raise ScenarioViolation(f"{what}: the stream ended without an end or error event: {events[-1:]}")
        self.stats["event_streams_checked"] += 1
        return got

    # ---- memory --------------------------------------------------------------------------------------
    async def read_memory(self, actor: str, sid: str, *, details: int = 2) -> tuple[Answer, list[dict[str, Any]]]:
        """List the memory of a space (every page) and check it; `details` newest input texts are read
        back (GET /memory/{object}) and compared with the input's text."""
        m = self.model
        expected = m.read_memory_status(actor, sid)
        rows: list[dict[str, Any]] = []
        cursor, first = None, None
        while True:
            q = "" if cursor is None else f"?cursor={cursor}"
            got = await self.check_read(actor, f"/spaces/{sid}/memory{q}", expected)
            first = first or got
            if got.status != 200:
                return got, []
            rows.extend(got.body["memory"])
            cursor = got.body["next_cursor"]
            if cursor is None:
                break
        what = f"GET /spaces/{sid}/memory as {actor}"
        by_object = {}
        retained: Counter[str] = Counter()
        inputs = {memory_object(op, "source"): op for op in m.inputs}
        for r in rows:
            if r["object"] in by_object:
                raise ScenarioViolation(f"{what}: object {r['object']} listed twice")
            by_object[r["object"]] = r
            if r["owner"] != sid and r["scope"] != "instance":
                raise ScenarioViolation(f"{what}: a {r['scope']} row of {r['owner']} is listed here")
            if r["owner"] != sid and READ not in m.rights(actor, r["owner"]):
                raise ScenarioViolation(f"{what}: instance memory of {r['owner']}, which {actor} may not read, "
                                        "is listed here")
            if (r["scope"] == "room") != (r["room"] is not None) or (r["room"] is not None and r["room"] != r["owner"]):
                raise ScenarioViolation(f"{what}: room {r['room']} of a {r['scope']} row owned by {r['owner']}")
            if r["kind"] == "text":
                m.saw_memory(r["object"], r["owner"])
                if r["source"] in inputs:
                    retained[inputs[r["source"]]] += 1
        twice = [op for op, n in retained.items() if n > 1]
        if twice:
            raise ScenarioViolation(f"{what}: inputs retained more than once: {twice}")
        for i in m.inputs.values():
            if i.space == sid and m.memory_expected(i.op) and i.text_object not in by_object:
                raise ScenarioViolation(f"{what}: the completed input {i.op} has no text memory here")
        for mem in m.memory.values():
            if mem.owner == sid and mem.obj not in by_object:
                raise ScenarioViolation(f"{what}: known text memory {mem.obj} ({mem.origin}) is not listed")
        texts = [mem for mem in m.memory.values() if mem.owner == sid and mem.obj in by_object]
        for mem in texts[-details:] if details else []:
            await self.read_memory_object(actor, mem.obj)
        self.stats["memory_rows_checked"] += len(rows)
        return first, rows

    async def read_memory_object(self, actor: str, obj: str) -> Answer:
        m = self.model
        expected = m.read_memory_object_status(actor, obj)
        got = await self.check_read(actor, f"/memory/{obj}", expected)
        if got.status == 200:
            what = f"GET /memory/{obj} as {actor}"
            b = got.body
            data = base64.b64decode(b["data"])
            row = b["row"]
            if row["object"] != obj or int(row["byte_length"]) != len(data) or b["next_offset"] != str(len(data)):
                raise ScenarioViolation(f"{what}: row {row} with {len(data)} bytes, next_offset {b['next_offset']}")
            m.saw_memory(obj, row["owner"])
            known = m.memory.get(obj)
            if known is not None:
                if row["kind"] != "text" or row["owner"] != known.owner or data != known.text.encode("utf-8"):
                    raise ScenarioViolation(f"{what}: {row['kind']} of {row['owner']} holding {data!r}; expected "
                                            f"the text {known.text!r} of {known.owner}")
            self.stats["memory_objects_checked"] += 1
        return got

    # ---- steps -------------------------------------------------------------------------------------
    def _pick(self, items: list, index: int):
        return items[index % len(items)] if items else None

    def _ref(self, items: list, ref: Any):
        """A step's reference: a session name (str) or an index into `items` (modulo their count)."""
        if isinstance(ref, str):
            if ref not in self.names:
                raise ValueError(f"step refers to {ref!r}, which no earlier step named")
            return self.names[ref]
        return self._pick(items, ref)

    def _memory_ref(self, ref: Any) -> str | None:
        """A text memory: a named input's or publication's, or an index into the known text memory."""
        if isinstance(ref, str):
            return memory_object(self._ref([], ref), "text")
        return self._pick(list(self.model.memory), ref)

    def _live(self, actor: str) -> list[int]:
        return sorted((s for s in self.model.parties[actor].receipts if (actor, s) in self.sent), reverse=True)

    def _text(self, step: dict[str, Any]) -> str:
        if "text" in step:
            return step["text"]
        self._texts += 1
        return f"Remember the word {WORDS[self._texts % len(WORDS)]}. Say it."

    async def run(self, steps: list[dict[str, Any]]) -> None:
        for step in steps:
            await self.run_step(step)

    async def run_step(self, step: dict[str, Any]) -> str:
        """Run one step; answers what it did ("skipped" when its references resolve to nothing).
        A step's `expect` (a status or a list of them) must hold for its main request, and its
        `name` names what it created (or the input it cancelled) for later steps."""
        actor, do = step["actor"], step["do"]
        m, party = self.model, self.parties[actor]
        mp = m.parties[actor]
        self.stats[f"step_{do}"] += 1
        if (self.retire_above is not None and mp.registered and len(mp.receipts) > self.retire_above
                and do not in ("read_space", "read_operation", "read_result", "read_memory", "wait")):
            await self._auto_retire(actor)
        answer = await self._do(step, actor, do, party, mp)
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

    async def _do(self, step: dict[str, Any], actor: str, do: str, party: Party, mp) -> Answer | None:
        m = self.model
        spaces = list(m.spaces)
        if do == "register":
            return await self.mutate(actor, REGISTER, {})
        if do == "space":
            return await self.mutate(actor, SPACE, {"scope": step.get("scope", "private")})
        if do == "conversation":
            sid = self._ref(spaces, step.get("space", 0))
            return None if sid is None else await self.mutate(actor, CONVERSATION, {}, space=sid)
        if do == "member":
            sid = self._ref(spaces, step.get("space", 0))
            target = m.parties.get(step.get("target", ""))
            if sid is None or target is None or target.pid is None:
                return None
            return await self.mutate(actor, MEMBER, {"participant": target.pid,
                                                     "permissions": list(step.get("permissions", []))}, space=sid)
        if do in ("retry", "changed"):
            seq = self._pick(self._live(actor), step.get("back", 1) - 1)
            if seq is None:
                return None
            old = self.sent[(actor, seq)]
            if do == "retry":
                return await self.send(old)
            # same sequence and fields, another operation key: other canonical bytes
            return await self.mutate(actor, old.kind, old.fields, space=old.space, seq=seq)
        if do == "future":
            return await self.mutate(actor, SPACE, {"scope": "private"}, seq=party.next_sequence + 1)
        if do == "stale":
            if mp.floor <= 1:
                return None
            return await self.mutate(actor, SPACE, {"scope": "private"}, seq=mp.floor - 1)
        if do == "retire":
            if not mp.registered:
                return None
            await self.refresh_inputs(actor)
            return await self.mutate(actor, RETIRE, {"retry_floor": str(party.next_sequence)})
        if do == "read_space":
            sid = self._ref(spaces, step.get("space", 0))
            return None if sid is None else await self.check_read(actor, f"/spaces/{sid}",
                                                                  m.read_space_status(actor, sid))
        if do == "read_operation":
            seq = self._pick(self._live(actor), step.get("back", 1) - 1)
            if seq is None:
                return None
            body = mp.receipts[seq].body
            if body["operation"] in m.inputs:
                return await self.read_receipt(actor, body["operation"])
            return await self.check_read(actor, f"/operations/{body['operation']}", 200, body)
        if do == "input":
            con = self._ref(list(m.conversations), step.get("conversation", 0))
            if con is None or self.model_name is None:
                return None
            fields = {"text": self._text(step), "model": step.get("model", self.model_name),
                      "max_output_tokens": step.get("max_output_tokens", self.max_output_tokens),
                      "temperature": step.get("temperature", 0)}
            return await self.mutate(actor, INPUT, fields, space=con)
        if do == "cancel":
            ref = step.get("input")
            if ref is None:
                own = [i.op for i in sorted(m.inputs_of(actor), key=lambda i: -i.seq) if not i.retired]
                op = self._pick(own, step.get("back", 1) - 1)
            else:
                op = self._ref(list(m.inputs), ref)
            if op is None:
                return None
            i = m.inputs[op]
            return await self.mutate(actor, CANCEL, {"target_sequence": str(i.seq)}, space=i.con)
        if do == "read_result":
            op = self._ref(list(m.inputs), step.get("input", 0))
            if op is None:
                return None
            via = step.get("via", "offset")
            if via == "receipt":
                answer = await self.read_receipt(actor, op)
            elif via == "sse":
                answer = await self.read_events(actor, op, step.get("resume"))
            else:
                answer = await self.read_result(actor, op, offset=step.get("offset", 0), limit=step.get("limit"))
            i = m.inputs[op]
            if answer.status == 200 and i.actor != actor:   # a foreign author's counters stay null
                author = m.parties[i.actor].pid
                got = await self.check_read(actor, f"/participant?participant={author}", 200)
                if got.body["next_sequence"] is not None or got.body["retry_floor"] is not None:
                    raise ScenarioViolation(f"{actor} reads {i.actor}'s counters: {got.body}")
            return answer
        if do == "wait":
            op = self._ref(list(m.inputs), step.get("input", -1))
            if op is None:
                return None
            done = await self.wait_input(actor, op, step.get("timeout"))
            end = done["execution"]
            if "execution" in step and end not in step["execution"]:
                raise ScenarioViolation(f"step {step}: the input ended {end}")
            if "recalled" in step and self.prompt_tokens is not None and end == "completed" and done["result"]:
                plain = self.prompt_tokens(m.inputs[op].text)
                used = done["result"]["input_tokens"]
                if (used > plain) != bool(step["recalled"]):
                    raise ScenarioViolation(f"step {step}: its prompt had {used} tokens, {plain} with nothing "
                                            f"recalled: memory was {'not ' if step['recalled'] else ''}recalled")
                self.stats["recall_checked"] += 1
            return Answer(200, done, {})
        if do == "publish":
            if not m.memory_enabled:
                return None
            obj = self._memory_ref(step.get("memory", 0))
            dest = self._ref(spaces, step.get("space", 0))
            if obj is None or dest is None:
                return None
            known = m.memory.get(obj) or m.maybe_memory(obj)
            version = step.get("source_version", known.version if known else 1)
            return await self.mutate(actor, PUBLISH, {"object": obj, "source_version": str(version)}, space=dest)
        if do == "read_memory":
            if not m.memory_enabled:
                return None
            if "memory" in step:
                obj = self._memory_ref(step["memory"])
                return None if obj is None else await self.read_memory_object(actor, obj)
            sid = self._ref(spaces, step.get("space", 0))
            if sid is None:
                return None
            answer, rows = await self.read_memory(actor, sid)
            listed = {r["object"] for r in rows}
            for name in step.get("contains", []):
                if memory_object(self.names[name], "text") not in listed:
                    raise ScenarioViolation(f"step {step}: the text memory of {name} is not listed")
            for name in step.get("lacks", []):
                if memory_object(self.names[name], "text") in listed:
                    raise ScenarioViolation(f"step {step}: the text memory of {name} is listed")
            return answer
        raise ValueError(f"unknown step {step!r}")

    async def check_read(self, actor: str, path: str, status: int | frozenset[int], body: Any = None) -> Answer:
        party = self.parties[actor]
        got = await self._definitive(lambda: party.get(path), f"GET {path} as {actor}")
        if not _allows(status, got.status) or (body is not None and got.body != body):
            raise ScenarioViolation(f"GET {path} as {actor}: expected {_show(status)} {body or ''}, got {got.status} "
                                    f"{got.body}")
        self.stats["reads_checked"] += 1
        self.stats[f"read_{got.status}"] += 1
        return got

    # ---- the ledger check --------------------------------------------------------------------------
    async def verify(self) -> int:
        """Every acknowledged receipt identical (an input's only progressed; 410 once retired), counters
        as the model says, and every ended input's result byte-identical to what was read before."""
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
            for r in list(mp.receipts.values()):
                if r.body is None:
                    continue
                op = r.body["operation"]
                if op in self.model.inputs:
                    await self.read_receipt(name, op)
                    await self.read_result(name, op)   # agrees with every byte read of it before
                    checks += 1
                else:
                    await self.check_read(name, f"/operations/{op}", 200, r.body)
                checks += 1
            for op in sorted(mp.retired_ops):
                await self.check_read(name, f"/operations/{op}", 410)
                checks += 1
        return checks
