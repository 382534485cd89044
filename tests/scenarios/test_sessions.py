"""Scripted multi-participant sessions (scenarios/data/*.json) against an `aotx serve`-like stack in this
process: a real nats-server, the shared runtime with the real model and embedding model, the shared routes
over real HTTP. Every step's answer is checked against the rule model (scenarios.Model) and against the
status the session file documents (`expect`); `wait` steps with `recalled` check, from the input's token
count, whether memory of earlier inputs went into its prompt; afterwards the runner's ledger is read back
(every receipt, every result byte-identical) and then once more after a restart of the runtime on the
same journal."""
from __future__ import annotations

from pathlib import Path

import pytest

from aotx.chat_types import ChatMessage
from scenarios import load

from .stack import fresh_spec, http_stack, runner_for

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"
SESSIONS = sorted(DATA.glob("*.json"))


def _actors(steps) -> list[str]:
    return list(dict.fromkeys(s["actor"] for s in steps))


def test_session_files_are_valid():
    assert {p.stem for p in SESSIONS} >= {"room_two_members", "private_spaces_one_owner", "cancel_and_retire"}
    for path in SESSIONS:
        steps = load(path)
        named = set()
        for s in steps:
            for key in ("space", "conversation", "input", "memory"):
                if isinstance(s.get(key), str):
                    assert s[key] in named, (path.name, s)
            named.update([s["name"]] if "name" in s else [])
            named.update(s.get("contains", []) + s.get("lacks", []))


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem)
async def test_session(path, nats_url, service):
    steps = load(path)
    spec = fresh_spec()

    def plain_prompt(text: str) -> int:
        return len(service.chat_prompt([ChatMessage(role="user", content=text)]))

    async with http_stack(nats_url, service, spec) as (runtime, transport):
        runner = runner_for(transport, _actors(steps), prompt_tokens=plain_prompt)
        await runner.sync()
        assert runner.model.execution, "the stack runs inputs"
        assert runner.model.memory_enabled, "the stack serves the memory routes"
        for i, step in enumerate(steps):
            did = await runner.run_step(step)
            assert did == step["do"], (i, step, did)
        checks = await runner.verify()
        live = runtime.state_hash()
        results = dict(runner.results)
    assert checks > 0 and runner.stats["reads_checked"] > 0
    if any("recalled" in s for s in steps):
        assert runner.stats["recall_checked"] > 0
    if any(s["do"] == "read_memory" for s in steps):
        assert runner.stats["memory_rows_checked"] > 0 and runner.stats["memory_objects_checked"] > 0
    print(path.stem, dict(sorted(runner.stats.items())))
    # the same journal, a new runtime: every receipt and result byte-identical, memory listed again
    async with http_stack(nats_url, service, spec) as (runtime, transport):
        assert runtime.state_hash() == live
        for party in runner.parties.values():
            party.transport = transport
        runner.restarted()
        await runner.verify()
        assert {op: runner.results[op] for op in results} == results
        for sid in runner.model.spaces:
            readers = [n for n in runner.parties if runner.model.read_memory_status(n, sid) == 200]
            if readers and runner.model.memory_enabled:
                await runner.read_memory(readers[0], sid)
