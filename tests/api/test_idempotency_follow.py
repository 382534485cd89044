"""A streamed repeat that follows a keyed first attempt which then ends INTERRUPTED (a save given up, or a
restart's recovery) does not end short: after the saved events it sends its surface's own mid-stream error
event with the 409 semantics of a buffered repeat (`idempotency_key_interrupted`, naming the header) — the
status line went out as 200 already, so the error travels in the stream, as each surface sends errors there."""
from __future__ import annotations

import asyncio
import json

import pytest

from aotx.stored import FinishKey, KeyEnd, identity_of_key
from api.idempotency.header import body_digest
from tests.api.fake_service import FakeService
from tests.waiting import wait_until_async

from .test_idempotency import BODIES, REPLAYED, GatedService, post, running


class HalfGated(GatedService):
    """Generations give their first delta at once, then wait for `gate` before the rest."""

    def submit(self, prompt_ids, params, *, surface, lane):
        handle = FakeService.submit(self, prompt_ids, params, surface=surface, lane=lane)
        gate, inner = self.gate, handle._gen

        async def half():
            n = 0
            async for delta in inner():
                if n == 1:
                    await gate.wait()
                n += 1
                yield delta
        handle._gen = half
        return handle


def _events(data: bytes) -> list[tuple[str | None, dict | str]]:
    out = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        kind, payload = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        out.append((kind, payload if payload == "[DONE]" else json.loads(payload)))
    return out


@pytest.mark.parametrize("surface", sorted(BODIES))
async def test_a_streamed_repeat_of_an_attempt_that_ends_interrupted_ends_with_the_native_error(nats_url, surface):
    async with running(nats_url) as rig:
        client, _, runtime = rig
        service = HalfGated()
        service.gate.clear()
        client.app.extensions["aotx"] = service
        path, body = BODIES[surface]
        body = {**body, "stream": True, **({"store": False} if surface == "responses" else {})}  # store: see _bound
        identity, digest = identity_of_key("sk-a"), body_digest(body)
        first = asyncio.ensure_future(post(client, path, body, "cut"))
        await wait_until_async(lambda: runtime.stored.reads.key(identity, surface, "cut", digest).chunks,
                               "the first attempt to save its first events")
        repeat = asyncio.ensure_future(post(client, path, body, "cut"))
        await wait_until_async(lambda: len(runtime.stored.signals), "the repeat to follow the first attempt")
        # the first attempt's answer cannot be kept to its end (what a save given up records)
        await runtime.stored.record(identity, FinishKey(surface, "cut", 409, {}, KeyEnd.INTERRUPTED))
        r, data = await repeat
        assert r.status_code == 200 and r.headers[REPLAYED] == "true"
        kind, last = _events(data)[-1]
        if surface == "messages":
            assert kind == "error" and last["type"] == "error"
            assert last["error"]["type"] == "invalid_request_error" and "interrupted" in last["error"]["message"]
        elif surface == "responses":
            assert kind == "error" and last["type"] == "error" and last["code"] == "idempotency_key_interrupted"
            assert last["param"] == "Idempotency-Key"
            seqs = [e["sequence_number"] for _, e in _events(data)]
            assert seqs == list(range(len(seqs)))               # numbering continued after the saved events
        else:
            assert last["error"]["code"] == "idempotency_key_interrupted"
            assert last["error"]["param"] == "Idempotency-Key" and "interrupted" in last["error"]["message"]
        service.gate.set()
        await first
