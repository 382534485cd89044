"""The steps table: each scenario verb (a step's `do`) and the function that runs it.

A handler takes the runner, the step and its actor, and answers the step's main answer, or None when
the step's references resolve to nothing (it is then skipped). References are a session name (what an
earlier step's `name` named) or an index into what the model knows (modulo their count).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from .canonical import memory_object
from .client import Answer
from .violation import ScenarioViolation
from .vocabulary import CANCEL, CONVERSATION, INPUT, MEMBER, PUBLISH, REGISTER, RETIRE, SPACE

if TYPE_CHECKING:
    from .runner import Runner

Step = dict[str, Any]
Handler = Callable[["Runner", Step, str], Awaitable[Answer | None]]
# steps that only read: they never make the runner retire receipts first
READ_ONLY = frozenset({"read_space", "read_operation", "read_result", "read_memory", "wait"})
WORDS = ("river", "copper", "lantern", "harbour", "orchard", "comet", "violin", "granite", "meadow", "falcon",
         "saffron", "glacier", "tulip", "compass", "ember", "willow")


# ---- references --------------------------------------------------------------------------------------
def _pick(items: list, index: int):
    return items[index % len(items)] if items else None


def _ref(r: Runner, items: list, ref: Any):
    """A step's reference: a session name (str) or an index into `items` (modulo their count)."""
    if isinstance(ref, str):
        if ref not in r.names:
            raise ValueError(f"step refers to {ref!r}, which no earlier step named")
        return r.names[ref]
    return _pick(items, ref)


def _space(r: Runner, step: Step) -> str | None:
    return _ref(r, list(r.model.spaces), step.get("space", 0))


def _memory_ref(r: Runner, ref: Any) -> str | None:
    """A text memory: a named input's or publication's, or an index into the known text memory."""
    if isinstance(ref, str):
        return memory_object(_ref(r, [], ref), "text")
    return _pick(list(r.model.memory), ref)


def _live(r: Runner, actor: str) -> list[int]:
    """The actor's sequences with an unretired receipt that this runner sent, newest first."""
    return sorted((s for s in r.model.parties[actor].receipts if (actor, s) in r.sent), reverse=True)


def _back(r: Runner, step: Step, actor: str) -> int | None:
    return _pick(_live(r, actor), step.get("back", 1) - 1)


def _text(r: Runner, step: Step) -> str:
    if "text" in step:
        return step["text"]
    r.texts_made += 1
    return f"Remember the word {WORDS[r.texts_made % len(WORDS)]}. Say it."


# ---- the journal core ----------------------------------------------------------------------------------
async def register(r: Runner, step: Step, actor: str) -> Answer | None:
    return await r.mutate(actor, REGISTER, {})


async def space(r: Runner, step: Step, actor: str) -> Answer | None:
    return await r.mutate(actor, SPACE, {"scope": step.get("scope", "private")})


async def conversation(r: Runner, step: Step, actor: str) -> Answer | None:
    sid = _space(r, step)
    return None if sid is None else await r.mutate(actor, CONVERSATION, {}, space=sid)


async def member(r: Runner, step: Step, actor: str) -> Answer | None:
    sid = _space(r, step)
    target = r.model.parties.get(step.get("target", ""))
    if sid is None or target is None or target.pid is None:
        return None
    return await r.mutate(actor, MEMBER, {"participant": target.pid,
                                          "permissions": list(step.get("permissions", []))}, space=sid)


async def retry(r: Runner, step: Step, actor: str) -> Answer | None:
    """An admitted command sent again exactly."""
    seq = _back(r, step, actor)
    return None if seq is None else await r.send(r.sent[(actor, seq)])


async def changed(r: Runner, step: Step, actor: str) -> Answer | None:
    """An admitted command's sequence and fields with another operation key: other canonical bytes."""
    seq = _back(r, step, actor)
    if seq is None:
        return None
    old = r.sent[(actor, seq)]
    return await r.mutate(actor, old.kind, old.fields, space=old.space, seq=seq)


async def future(r: Runner, step: Step, actor: str) -> Answer | None:
    return await r.mutate(actor, SPACE, {"scope": "private"}, seq=r.parties[actor].next_sequence + 1)


async def stale(r: Runner, step: Step, actor: str) -> Answer | None:
    floor = r.model.parties[actor].floor
    return None if floor <= 1 else await r.mutate(actor, SPACE, {"scope": "private"}, seq=floor - 1)


async def retire(r: Runner, step: Step, actor: str) -> Answer | None:
    if not r.model.parties[actor].registered:
        return None
    await r.refresh_inputs(actor)
    return await r.mutate(actor, RETIRE, {"retry_floor": str(r.parties[actor].next_sequence)})


async def read_space(r: Runner, step: Step, actor: str) -> Answer | None:
    sid = _space(r, step)
    return None if sid is None else await r.check_read(actor, f"/spaces/{sid}", r.model.read_space_status(actor, sid))


async def read_operation(r: Runner, step: Step, actor: str) -> Answer | None:
    seq = _back(r, step, actor)
    if seq is None:
        return None
    body = r.model.parties[actor].receipts[seq].body
    if body["operation"] in r.model.inputs:
        return await r.read_receipt(actor, body["operation"])
    return await r.check_read(actor, f"/operations/{body['operation']}", 200, body)


# ---- inputs ----------------------------------------------------------------------------------------------
async def input_(r: Runner, step: Step, actor: str) -> Answer | None:
    con = _ref(r, list(r.model.conversations), step.get("conversation", 0))
    if con is None or r.model_name is None:
        return None
    fields = {"text": _text(r, step), "model": step.get("model", r.model_name),
              "max_output_tokens": step.get("max_output_tokens", r.max_output_tokens),
              "temperature": step.get("temperature", 0)}
    return await r.mutate(actor, INPUT, fields, space=con)


async def cancel(r: Runner, step: Step, actor: str) -> Answer | None:
    m = r.model
    ref = step.get("input")
    if ref is None:
        own = [i.op for i in sorted(m.inputs_of(actor), key=lambda i: -i.seq) if not i.retired]
        op = _pick(own, step.get("back", 1) - 1)
    else:
        op = _ref(r, list(m.inputs), ref)
    if op is None:
        return None
    i = m.inputs[op]
    return await r.mutate(actor, CANCEL, {"target_sequence": str(i.seq)}, space=i.con)


async def read_result(r: Runner, step: Step, actor: str) -> Answer | None:
    """Read an input's result `via` its receipt, its SSE stream (resumed at `resume`) or by `offset`;
    a foreign author's counters must read null once the result is readable."""
    m = r.model
    op = _ref(r, list(m.inputs), step.get("input", 0))
    if op is None:
        return None
    via = step.get("via", "offset")
    if via == "receipt":
        answer = await r.read_receipt(actor, op)
    elif via == "sse":
        answer = await r.read_events(actor, op, step.get("resume"))
    else:
        answer = await r.read_result(actor, op, offset=step.get("offset", 0), limit=step.get("limit"))
    i = m.inputs[op]
    if answer.status == 200 and i.actor != actor:   # a foreign author's counters stay null
        author = m.parties[i.actor].pid
        got = await r.check_read(actor, f"/participant?participant={author}", 200)
        if got.body["next_sequence"] is not None or got.body["retry_floor"] is not None:
            raise ScenarioViolation(f"{actor} reads {i.actor}'s counters: {got.body}")
    return answer


async def wait(r: Runner, step: Step, actor: str) -> Answer | None:
    """Wait for an input to end: in one of the step's `execution` states, and with memory `recalled` or not
    (its prompt longer than the text's alone) where the runner knows the served chat template."""
    m = r.model
    op = _ref(r, list(m.inputs), step.get("input", -1))
    if op is None:
        return None
    done = await r.wait_input(actor, op, step.get("timeout"))
    end = done["execution"]
    if "execution" in step and end not in step["execution"]:
        raise ScenarioViolation(f"step {step}: the input ended {end}")
    if "recalled" in step and r.prompt_tokens is not None and end == "completed" and done["result"]:
        plain = r.prompt_tokens(m.inputs[op].text)
        used = done["result"]["input_tokens"]
        if (used > plain) != bool(step["recalled"]):
            raise ScenarioViolation(f"step {step}: its prompt had {used} tokens, {plain} with nothing "
                                    f"recalled: memory was {'not ' if step['recalled'] else ''}recalled")
        r.stats["recall_checked"] += 1
    return Answer(200, done, {})


# ---- memory ----------------------------------------------------------------------------------------------
async def publish(r: Runner, step: Step, actor: str) -> Answer | None:
    m = r.model
    if not m.memory_enabled:
        return None
    obj = _memory_ref(r, step.get("memory", 0))
    dest = _space(r, step)
    if obj is None or dest is None:
        return None
    known = m.memory.get(obj) or m.maybe_memory(obj)
    version = step.get("source_version", known.version if known else 1)
    return await r.mutate(actor, PUBLISH, {"object": obj, "source_version": str(version)}, space=dest)


async def read_memory(r: Runner, step: Step, actor: str) -> Answer | None:
    """One memory object (`memory`), or a space's listing, which must list the text memory of every
    input named in `contains` and of none named in `lacks`."""
    if not r.model.memory_enabled:
        return None
    if "memory" in step:
        obj = _memory_ref(r, step["memory"])
        return None if obj is None else await r.read_memory_object(actor, obj)
    sid = _space(r, step)
    if sid is None:
        return None
    answer, rows = await r.read_memory(actor, sid)
    listed = {row["object"] for row in rows}
    for name in step.get("contains", []):
        if memory_object(r.names[name], "text") not in listed:
            raise ScenarioViolation(f"step {step}: the text memory of {name} is not listed")
    for name in step.get("lacks", []):
        if memory_object(r.names[name], "text") in listed:
            raise ScenarioViolation(f"step {step}: the text memory of {name} is listed")
    return answer


STEPS: dict[str, Handler] = {
    "register": register, "space": space, "conversation": conversation, "member": member,
    "retry": retry, "changed": changed, "future": future, "stale": stale, "retire": retire,
    "read_space": read_space, "read_operation": read_operation,
    "input": input_, "cancel": cancel, "read_result": read_result, "wait": wait,
    "publish": publish, "read_memory": read_memory,
}
