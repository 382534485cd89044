"""The drill's shared inputs: a principal of their own (carol) posts inputs across conversations,
a ledger of every acknowledged input, and the checks made after each kill.

Carol registers, creates spaces and conversations, then posts inputs (greedy, small
max_output_tokens) at a steady rate. A command without a definitive answer (no HTTP answer,
429, 503) is retried with the exact same body, as the scenario runner does: it must be new once
(202) or answer its receipt (200). Before a runtime kill the drill posts a long "victim" input and
kills the runtime right after its first output bytes are saved (read back through
/operations/{op}/result).

Checks, once every acknowledged input is terminal again (the load pauses):
* each input's receipt is its own (operation, sequence), its admission saved, its execution
  terminal with a saved terminal result;
* the result bytes only ever grow by appending while the input runs; once terminal they, the
  token counts and the finish never change again (a completed input's bytes are byte-identical
  before and after a restart; an interrupted one's never grow after it, so it never ran again);
* an input seen running before a runtime kill is `interrupted` after the restart unless its
  completion was saved before the kill; each victim is `interrupted`;
* memory (GET /spaces/{space}/memory): at most one `text` row per input operation (its source
  record names the operation), never more text rows in a space than inputs admitted to its
  conversations, and an input's text memory never appears or disappears once it is terminal;
  a victim keeps exactly the text memory it had before the kill.
"""
from __future__ import annotations

import asyncio
import base64
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from aotx.memory.payload import SourceRecord
from aotx.state.ids import IdKind, format_id
from scenarios import Answer, Party, ScenarioViolation, new_key
from scenarios.runner import definitive

INPUT_ACTOR = "carol"
TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
PROMPTS = ("Name one colour.", "What is the capital of France?", "Give me a word that rhymes with cat.",
           "Say hello in French.", "Count from one to five.", "Name an animal that lives in the sea.",
           "What is two plus two?", "Suggest a name for a cat.", "Describe the sky in three words.",
           "Name a fruit that is yellow.")
VICTIM_PROMPT = "Write a long story about a lighthouse keeper, the sea and a storm."
INPUT_PAGES = 16            # each input's KV page limit (256 tokens: prompt, recalled memory and output)
MAX_INPUTS = 400            # carol's receipts stay well inside the receipt table (no retirement here)


@dataclass
class InputRecord:
    op: str
    seq: int
    space: str
    con: str
    max_tokens: int
    receipt: dict[str, Any]           # as acknowledged
    victim: bool = False
    execution: str = "queued"        # last seen
    data: bytes = b""                 # result bytes last seen (they may only grow while it runs)
    final: dict[str, Any] | None = None   # terminal: execution, bytes, token counts, finish (never change again)
    memory: int | None = None         # text memory rows naming this operation, once terminal
    seen_at_kill: list[int] = field(default_factory=list)   # runtime kills it was seen unfinished before


class InputLoad:
    def __init__(self, party: Party, rng: random.Random, *, max_tokens: int, say: Callable[[str], None],
                 unknown_deadline_s: float = 90.0) -> None:
        self.party, self.rng, self.max_tokens, self.say = party, rng, max_tokens, say
        self.unknown_deadline_s = unknown_deadline_s
        self.model = ""
        self.conversations: list[tuple[str, str]] = []       # (space, conversation)
        self.ledger: dict[str, InputRecord] = {}
        self.stats: Counter[str] = Counter()
        self.memory_route = True
        self._sources: dict[str, str] = {}                   # source object -> operation it names
        self._victim_memory: dict[str, int] = {}             # victim op -> its text memory rows before the kill
        self._reading = asyncio.Lock()                       # one read-and-observe of the ledger at a time

    # ---- posting ---------------------------------------------------------------------------------
    async def _definitive(self, call: Callable[[], Awaitable[Answer]], what: str) -> Answer:
        return await definitive(call, what, self.unknown_deadline_s, self.stats)

    async def _post(self, path: str, fields: dict[str, Any], new: int) -> Answer:
        """Post at carol's next sequence; retried exactly until definitive; new (`new`) or the receipt of
        that very sequence when an unanswered attempt had landed (200)."""
        p = self.party
        seq = p.next_sequence
        raw = p.body(fields, key=new_key(), sequence=seq)
        before = self.stats["unknown_answers"]
        answer = await self._definitive(lambda: p.post(path, raw), f"POST {path} as {p.name} sequence {seq}")
        if answer.status == new or (answer.status == 200 and self.stats["unknown_answers"] > before
                                    and isinstance(answer.body, dict) and answer.body.get("sequence") == str(seq)):
            if answer.status == 200:
                self.stats["landed_before_failure"] += 1
            p.next_sequence = seq + 1
            return answer
        raise ScenarioViolation(f"POST {path} as {p.name} sequence {seq}: expected {new}, got {answer.status} "
                                f"{answer.body}")

    async def setup(self, spaces: int = 2, per_space: int = 2) -> None:
        p = self.party
        me = await p.sync()
        caps = await self._definitive(lambda: p.get("/capabilities"), "GET /capabilities")
        if caps.status != 200 or not caps.body["routes"]["inputs"] or not caps.body["models"]:
            raise ScenarioViolation(f"the runtime runs no inputs: {caps.status} {caps.body}")
        self.model = caps.body["models"][0]["id"]
        if not me["registered"]:
            await self._post("/participant", {}, 201)
        for _ in range(spaces):
            sp = (await self._post("/spaces", {"scope": "private"}, 201)).body["resource"]
            for _ in range(per_space):
                con = (await self._post(f"/spaces/{sp}/conversations", {}, 201)).body["resource"]
                self.conversations.append((sp, con))

    async def submit(self, *, victim: bool = False) -> InputRecord | None:
        """One input; None when carol has used her receipt budget or the receipt table is full."""
        if len(self.ledger) >= MAX_INPUTS:
            return None
        space, con = self.conversations[self.rng.randrange(len(self.conversations))]
        text = VICTIM_PROMPT if victim else self.rng.choice(PROMPTS)
        tokens = max(self.max_tokens * 8, 96) if victim else self.rng.randint(max(1, self.max_tokens // 2),
                                                                               self.max_tokens)
        # greedy, as inputs were by default before revision 2 (a victim must still be generating when killed)
        fields = {"text": text, "model": self.model, "max_output_tokens": tokens, "pages": INPUT_PAGES,
                  "temperature": 0}
        try:
            answer = await self._post(f"/conversations/{con}/inputs", fields, 202)
        except ScenarioViolation:
            raise
        receipt = answer.body
        op = receipt.get("operation")
        if not isinstance(op, str) or op in self.ledger:
            raise ScenarioViolation(f"input {op} acknowledged twice or without an operation: {receipt}")
        if receipt.get("status", {}).get("admission") != "saved":
            raise ScenarioViolation(f"input {op} acknowledged without a saved admission: {receipt}")
        rec = self.ledger[op] = InputRecord(op, int(receipt["sequence"]), space, con, tokens, receipt, victim,
                                            execution=receipt.get("execution", "queued"))
        self.stats["victims" if victim else "inputs"] += 1
        return rec

    # ---- reading ---------------------------------------------------------------------------------
    async def _get(self, path: str) -> Answer:
        return await self._definitive(lambda: self.party.get(path), f"GET {path}")

    async def read(self, rec: InputRecord) -> tuple[dict[str, Any], bytes]:
        """Its receipt and its whole saved result, as one consistent observation."""
        got = await self._get(f"/operations/{rec.op}")
        if got.status != 200:
            raise ScenarioViolation(f"input {rec.op}: GET /operations answered {got.status} {got.body}")
        receipt = got.body
        data, offset, last = b"", 0, None
        while True:
            res = await self._get(f"/operations/{rec.op}/result?offset={offset}")
            if res.status != 200:
                raise ScenarioViolation(f"input {rec.op}: GET result at {offset} answered {res.status} {res.body}")
            last = res.body
            data += base64.b64decode(last["bytes"])
            offset = int(last["next_offset"])
            if offset >= int(last["saved_bytes"]) or not last["byte_length"]:
                break
        receipt = {**receipt, "_result": last}
        return receipt, data

    def observe(self, rec: InputRecord, receipt: dict[str, Any], data: bytes, when: str) -> None:
        """Bytes only grow while it runs; a terminal input never changes again."""
        for key, want in (("operation", rec.op), ("sequence", str(rec.seq)), ("kind", "conversation.input")):
            if receipt.get(key) != want:
                raise ScenarioViolation(f"{when}: input {rec.op} receipt {key} = {receipt.get(key)!r}, not {want!r}")
        if receipt["status"]["admission"] != "saved":
            raise ScenarioViolation(f"{when}: input {rec.op} admission not saved: {receipt['status']}")
        res = receipt["_result"]
        execution = res["execution"]  # read after the receipt, with the bytes and counts
        if receipt["execution"] in TERMINAL and receipt["execution"] != execution:
            raise ScenarioViolation(f"{when}: input {rec.op} receipt says {receipt['execution']}, its result then "
                                    f"says {execution}")
        if rec.final is not None:
            now = self._final(execution, data, res)
            if now != rec.final:
                raise ScenarioViolation(f"{when}: input {rec.op} changed after it was terminal:\n  then {rec.final}"
                                        f"\n  now  {now}")
            return
        if not data.startswith(rec.data):
            raise ScenarioViolation(f"{when}: input {rec.op} result bytes were rewritten: {rec.data!r} then {data!r}")
        rec.execution, rec.data = execution, data
        if receipt["execution"] in TERMINAL:
            if receipt["status"]["terminal"] != "saved":
                raise ScenarioViolation(f"{when}: input {rec.op} is {execution} without a saved terminal result")
            rec.final = self._final(execution, data, res)
            self.stats[f"execution_{execution}"] += 1

    @staticmethod
    def _final(execution: str, data: bytes, res: dict[str, Any]) -> dict[str, Any]:
        return {"execution": execution, "bytes": data, "input_tokens": res.get("input_tokens"),
                "output_tokens": res.get("output_tokens"), "finish": res.get("finish")}

    def unfinished(self) -> list[InputRecord]:
        return [r for r in self.ledger.values() if r.final is None]

    async def refresh(self, rec: InputRecord, when: str) -> None:
        """Read and observe, never interleaved with another reading (an older answer observed after a newer
        one would look like shrinking bytes)."""
        async with self._reading:
            receipt, data = await self.read(rec)
            self.observe(rec, receipt, data, when)

    async def observe_unfinished(self, when: str) -> None:
        for rec in self.unfinished():
            await self.refresh(rec, when)

    async def first_bytes(self, rec: InputRecord, timeout: float) -> bool:
        """Poll its result until output bytes are saved while it still runs (True), or it ended / timed out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await self.refresh(rec, "waiting for the victim's first bytes")
            if rec.final is not None:
                return False
            if rec.data:
                return True
            await asyncio.sleep(0.02)
        return False

    async def before_runtime_kill(self, kill_no: int, victim: InputRecord | None) -> None:
        """Just before the kill: what every unfinished input shows (the victim's text memory too)."""
        if victim is not None and self.memory_route:
            rows = await self._text_rows(victim.space)
            if rows is not None:
                self._victim_memory[victim.op] = sum(1 for op in rows if op == victim.op)
        for rec in self.unfinished():
            rec.seen_at_kill.append(kill_no)

    async def wait_terminal(self, timeout: float, when: str) -> None:
        """Until every acknowledged input is terminal (the load is paused meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            await self.observe_unfinished(when)
            left = self.unfinished()
            if not left:
                return
            if time.monotonic() > deadline:
                raise ScenarioViolation(f"{when}: {len(left)} acknowledged inputs are still not terminal after "
                                        f"{timeout:g} s: " + ", ".join(f"{r.op} ({r.execution}, {len(r.data)} bytes)"
                                                                        for r in left[:5]))
            await asyncio.sleep(0.1)

    # ---- the checks ------------------------------------------------------------------------------
    async def verify(self, when: str) -> int:
        """Every input read back (all terminal now); answers how many checks passed."""
        checks = 0
        for rec in self.ledger.values():
            await self.refresh(rec, when)
            checks += 1
            if rec.final is None:
                raise ScenarioViolation(f"{when}: input {rec.op} is {rec.execution}, not terminal")
            ex = rec.final["execution"]
            if rec.seen_at_kill and ex not in ("interrupted", "completed", "cancelled", "failed"):
                raise ScenarioViolation(f"{when}: input {rec.op} was running at a runtime kill, now {ex}")
            if rec.victim and rec.seen_at_kill and ex != "interrupted":
                raise ScenarioViolation(f"{when}: victim {rec.op} was killed mid-generation but is {ex}")
        checks += await self._check_memory(when)
        return checks

    async def _text_rows(self, space: str) -> list[str | None] | None:
        """The operation each `text` memory row of the space comes from (None: no source); None when the
        memory route is not served."""
        rows, cursor = [], 0
        while True:
            got = await self._get(f"/spaces/{space}/memory?cursor={cursor}")
            if got.status == 404 and "no shared route" in str(got.body):
                self.memory_route = False
                return None
            if got.status != 200:
                raise ScenarioViolation(f"GET /spaces/{space}/memory answered {got.status} {got.body}")
            rows += got.body["memory"]
            if got.body.get("next_cursor") is None:
                break
            cursor = int(got.body["next_cursor"])
        out = []
        for row in rows:
            if row["kind"] != "text":
                continue
            out.append(None if row["source"] is None else await self._source_op(row["source"]))
        return out

    async def _source_op(self, obj: str) -> str:
        if obj not in self._sources:
            got = await self._get(f"/memory/{obj}")
            if got.status != 200:
                raise ScenarioViolation(f"GET /memory/{obj} (a text row's source) answered {got.status} {got.body}")
            if got.body["row"]["kind"] != "source":
                raise ScenarioViolation(f"memory object {obj} named as a source is {got.body['row']['kind']}")
            record = SourceRecord.decode(base64.b64decode(got.body["data"]))
            self._sources[obj] = format_id(IdKind.OPERATION, record.operation[:16], record.operation[16:])
        return self._sources[obj]

    async def _check_memory(self, when: str) -> int:
        if not self.memory_route:
            return 0
        checks = 0
        by_space: dict[str, list[InputRecord]] = {}
        for rec in self.ledger.values():
            by_space.setdefault(rec.space, []).append(rec)
        for space in sorted({s for s, _ in self.conversations}):
            ops = await self._text_rows(space)
            if ops is None:
                self.say("memory route not served yet: the memory checks are skipped")
                return 0
            admitted = by_space.get(space, [])
            if len(ops) > len(admitted):
                raise ScenarioViolation(f"{when}: space {space} holds {len(ops)} text memories for "
                                        f"{len(admitted)} admitted inputs")
            count = Counter(ops)
            twice = [op for op, n in count.items() if n > 1]
            if twice:
                raise ScenarioViolation(f"{when}: text memory retained more than once for {twice}")
            mine = {r.op for r in admitted}
            foreign = [op for op in count if op not in mine]
            if foreign:
                raise ScenarioViolation(f"{when}: text memory in {space} from operations that are no input of "
                                        f"this space: {foreign}")
            for rec in admitted:
                n = count.get(rec.op, 0)
                if rec.memory is not None and n != rec.memory:
                    raise ScenarioViolation(f"{when}: input {rec.op} ({rec.final['execution']}) had {rec.memory} "
                                            f"text memories when terminal, now {n}")
                if rec.op in self._victim_memory and n != self._victim_memory[rec.op]:
                    raise ScenarioViolation(f"{when}: victim {rec.op} had {self._victim_memory[rec.op]} text "
                                            f"memories before the kill, {n} after the restart")
                rec.memory = n
                checks += 1
        self.stats["text_memories"] = sum(r.memory or 0 for r in self.ledger.values())
        return checks

    def summary(self) -> str:
        s = self.stats
        by = Counter(r.final["execution"] if r.final else r.execution for r in self.ledger.values())
        victims = [r for r in self.ledger.values() if r.victim]
        killed = [r for r in self.ledger.values() if r.seen_at_kill]
        grew = sum(1 for r in killed if r.final and r.final["execution"] == "interrupted" and r.data)
        mem = (f"; text memories {s['text_memories']} (at most one per input, none repeated)" if self.memory_route
               else "; memory route not served: memory checks skipped")
        return (f"inputs acknowledged: {len(self.ledger)} ({s['landed_before_failure']} landed before a kill and were "
                f"answered by their exact retry; {s['skipped_busy']} posting slots skipped while the in-flight cap "
                f"was reached); by execution: "
                + ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
                + f"\n  inputs running at a runtime kill: {len(killed)} ({grew} interrupted after saving output); "
                f"victims killed mid-generation: {sum(1 for v in victims if v.seen_at_kill)} of {len(victims)}, "
                f"interrupted {sum(1 for v in victims if v.final and v.final['execution'] == 'interrupted')}" + mem)
