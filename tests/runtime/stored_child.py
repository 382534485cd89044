"""A runtime in a process of its own, for kill -9 tests: `python -m tests.runtime.stored_child URL STREAM PREFIX`.

It records a keyed background response with two saved stream events and a keyed chat answer with one
chunk, none of them finished, prints READY and then waits to be killed (it never stops on its own)."""

from __future__ import annotations

import asyncio
import hashlib
import sys

from aotx.runtime import SharedRuntime
from aotx.stored import AppendKeyAnswer, BeginKey, CreateResponse, Saved, identity_of_key
from eventlog import StreamSpec

KEYED, ALICE = identity_of_key("sk-test"), "alice"
D1, D2 = hashlib.sha256(b"1").digest(), hashlib.sha256(b"2").digest()
RESPONSE = f"resp_{1:048x}"
EVENTS = [b'{"type":"response.created","sequence_number":0}', b'{"type":"response.in_progress","sequence_number":1}']


async def main(url: str, name: str, prefix: str) -> None:
    rt = await SharedRuntime(url, StreamSpec(name=name, subject_prefix=prefix), progress=False).start()
    for identity, command in (
            (KEYED, BeginKey("responses", "retry", D1, bound=RESPONSE)),
            (KEYED, CreateResponse(RESPONSE, 1_800_000_000, "m", [], background=True)),
            (ALICE, BeginKey("chat.completions", "c", D2)),
            (ALICE, AppendKeyAnswer("chat.completions", "c", 0, [b"data: {}\n\n"]))):
        out = await rt.stored.record(identity, command)
        assert isinstance(out, Saved), out
    assert isinstance(await rt.stored.append_events(KEYED, RESPONSE, 0, EVENTS), Saved)
    print("READY", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
