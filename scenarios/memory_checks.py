"""Memory reads, checked against the rule model: a space's listing (GET /spaces/{space}/memory, every page)
shows a row only in its owner space or with instance scope, at most one retained text per input
operation, the text of every completed input, and every text memory known to exist; a memory object
(GET /memory/{object}) holds the text the client knows it holds."""
from __future__ import annotations

import base64
from collections import Counter
from typing import TYPE_CHECKING, Any

from .canonical import memory_object
from .client import Answer
from .violation import ScenarioViolation
from .vocabulary import READ

if TYPE_CHECKING:
    from .runner import Runner


async def read_memory(runner: Runner, actor: str, sid: str, *, details: int = 2) -> tuple[Answer, list[dict[str, Any]]]:
    """List the memory of a space (every page) and check it; `details` newest input texts are read
    back (GET /memory/{object}) and compared with the input's text."""
    m = runner.model
    expected = m.read_memory_status(actor, sid)
    rows: list[dict[str, Any]] = []
    cursor, first = None, None
    while True:
        q = "" if cursor is None else f"?cursor={cursor}"
        got = await runner.check_read(actor, f"/spaces/{sid}/memory{q}", expected)
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
        await read_memory_object(runner, actor, mem.obj)
    runner.stats["memory_rows_checked"] += len(rows)
    return first, rows


async def read_memory_object(runner: Runner, actor: str, obj: str) -> Answer:
    m = runner.model
    expected = m.read_memory_object_status(actor, obj)
    got = await runner.check_read(actor, f"/memory/{obj}", expected)
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
        runner.stats["memory_objects_checked"] += 1
    return got
