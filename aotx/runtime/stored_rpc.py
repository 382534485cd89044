"""The runtime's side of the stored port across the split (op "stored" of aotx.runtime.rpc).

A gateway (aotx.runtime.stored_remote.RemoteStored) sends each call of the StoredJournal it serves the
standard surfaces with — a write, a read, a wait — to the runtime that writes the caller's identity
lineage (docs/SCALE.md §4: routed as shared commands are, by RemoteRuntime). Request fields beside the
rpc envelope:

    "call": "record" | "read" | "wait_events" | "wait_key", "identity": str,
    "args": aotx.stored.wire bytes — record: the command; read: [name, [positional], {keywords}];
            wait_events: [response_id, seen, timeout]; wait_key: [surface, key, seen, timeout]

The answer is 200 {"value": wire bytes of what the in-process port answered, "hold": whether the journal
is on hold now, "writer": this boot where it writes the identity's lineage}, or the rpc errors: 503
`not_owner` naming the holder (lease mode: the gateway re-sends there), 503 `lagging` (a read that could
not catch up), 400 for a malformed request. A write first takes the lineage's lease where needed, as a
shared command does; a read on a runtime that does not write the lineage first applies the log up to
where it ended when the read arrived (read_fresh), so it holds every acknowledged write. A wait lasts at
most MAX_WAIT seconds (below the gateway's request timeout); the gateway then reads again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..state import Grants
from ..state.rights import Actor
from ..stored import ids, wire
from ..stored.commands import StoredCommand
from ..stored.queries import ResponseEvents
from .lease_mode import lineage_refusal
from .outcome import Outcome
from .read_fresh import fresh

MAX_WAIT = 5.0    # seconds
MAX_ANSWER = 900 * 1024   # bytes of one packed value: below NATS's default max_payload (1 MiB)
READS = frozenset({"response", "input_items", "chain", "response_events", "conversation", "conversation_items",
                   "conversation_item", "all_conversation_items", "key"})
_COMMANDS = StoredCommand.__args__


def _bad(message: str) -> Outcome:
    return Outcome.error(400, "invalid_request", message)


async def answer_stored(runtime, req: dict) -> Outcome:
    call, identity, raw = req.get("call"), req.get("identity"), req.get("args")
    if not ids.is_identity(identity) or not isinstance(raw, bytes):
        return _bad("a stored call needs an identity and its packed args")
    try:
        args = wire.unpack(raw)
    except wire.WireError as exc:
        return _bad(f"stored call args: {exc}")
    lineage = ids.identity_lineage(identity)
    stored = runtime.stored
    if call == "record":
        if not isinstance(args, _COMMANDS):
            return _bad(f"record needs a stored command, not {type(args).__name__}")
        refused = await lineage_refusal(runtime, identity)   # lease mode: acquire, or name the holder
        if refused is not None:
            return refused
        value = await stored.record(identity, args)
    elif call == "read":
        if not (isinstance(args, list) and len(args) == 3 and args[0] in READS and isinstance(args[1], list)
                and isinstance(args[2], dict)):
            return _bad(f"read needs [one of {sorted(READS)}, [args], {{keywords}}]")
        if not runtime.writes(lineage):
            late = await fresh(runtime, "stored", Actor(identity, Grants()), {})
            if late is not None:
                return late
        value = getattr(stored.reads, args[0])(identity, *args[1], **args[2])
    elif call in ("wait_events", "wait_key"):
        if not (isinstance(args, list) and args and isinstance(args[-1], (int, float))):
            return _bad(f"{call} needs its args and a timeout")
        *what, timeout = args
        wait = stored.wait_events if call == "wait_events" else stored.wait_key
        await wait(identity, *what, max(0.0, min(float(timeout), MAX_WAIT)))
        value = None
    else:
        return _bad(f"unknown stored call {call!r}")
    packed = wire.pack(_fitted(value))
    if len(packed) > MAX_ANSWER:
        return Outcome.error(413, "too_large", f"the stored answer ({len(packed)} bytes) exceeds what one NATS "
                             f"reply between runtime and gateway carries ({MAX_ANSWER} bytes)")
    body = {"value": packed, "hold": bool(stored.on_hold())}
    if runtime.writes(lineage):
        body["writer"] = runtime.boot_id   # where the gateway sends this identity's calls next
    return Outcome(200, body)


def _fitted(value: Any) -> Any:
    """Saved stream events in one answer up to MAX_ANSWER bytes (at least one): the reader asks for the
    rest after the last it got (`next` says where; `finished` only once none is left out)."""
    if not isinstance(value, ResponseEvents):
        return value
    size, kept = 0, []
    for n, data in value.events:
        size += len(data) + 16
        if kept and size > MAX_ANSWER - 4096:
            return replace(value, events=tuple(kept), next=kept[-1][0] + 1, finished=False)
        kept.append((n, data))
    return value
