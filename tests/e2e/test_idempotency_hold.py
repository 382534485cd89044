"""Journal hold through a real `aotx serve` (on a nats-server the test owns, whose stream it fills): a request with
an Idempotency-Key answers 429 in its surface's envelope and stores nothing; a request without one is still
served; once room returns the key runs — with any body, since nothing was recorded for it."""
from __future__ import annotations

import asyncio

import anthropic
import nats
import openai
import pytest
from nats.js.errors import APIError

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess
from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
ASK = [{"role": "user", "content": "Name a colour."}]
REPLAYED = "Idempotent-Replayed"


async def _journal(url: str):
    nc = await nats.connect(url)
    js = nc.jetstream()
    names = [s.config.name for s in await js.streams_info() if not s.config.name.startswith(("OBJ_", "KV_"))]
    assert len(names) == 1, names
    return nc, js, await js.stream_info(names[0])


async def _fill(url: str) -> None:
    """Cap the journal just above what it holds, then fill it from another subject."""
    nc, js, info = await _journal(url)
    try:
        config = info.config
        config.max_bytes = info.state.bytes + 16 * 1024
        await js.update_stream(config)
        filler = config.subjects[0].removesuffix(">") + "filler"
        with pytest.raises(APIError):
            for i in range(10_000):
                await js.publish(filler, b"x" * 512)
    finally:
        await nc.close()


async def _make_room(url: str) -> None:
    nc, js, info = await _journal(url)
    try:
        config = info.config
        config.max_bytes = -1
        await js.update_stream(config)
    finally:
        await nc.close()


def test_a_keyed_request_during_a_hold_is_a_429_that_stores_nothing(nats_url):
    server = ServerProcess(*SERVER_ARGS, "--nats", nats_url).start()
    try:
        o = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="key-a", max_retries=0, timeout=120)
        a = anthropic.Anthropic(base_url=server.base_url, api_key="key-a", max_retries=0, timeout=120)
        asyncio.run(_fill(nats_url))
        for _ in range(2):   # the first meets the full stream, the second the hold
            with pytest.raises(openai.RateLimitError) as held:
                o.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4, extra_headers={"Idempotency-Key": "h"})
            assert held.value.body["code"] == "journal_hold"
        with pytest.raises(anthropic.RateLimitError) as held_msg:
            a.messages.create(model=MODEL, messages=ASK, max_tokens=4, extra_headers={"Idempotency-Key": "h"})
        assert held_msg.value.response.json()["error"]["type"] == "rate_limit_error"
        served = o.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4)        # no key: served
        assert served.choices[0].finish_reason in ("stop", "length")
        assert a.messages.create(model=MODEL, messages=ASK, max_tokens=4).type == "message"
        assert o.responses.create(model=MODEL, input="Name a colour.", max_output_tokens=4, store=False).id
        with pytest.raises(openai.RateLimitError):
            o.responses.create(model=MODEL, input="Name a colour.", max_output_tokens=4, store=False,
                               extra_headers={"Idempotency-Key": "h"})

        asyncio.run(_make_room(nats_url))

        def keyed():
            try:
                return o.chat.completions.with_raw_response.create(
                    model=MODEL, messages=ASK, max_tokens=6, extra_headers={"Idempotency-Key": "h"})
            except openai.RateLimitError:
                return None
        after = wait_until(keyed, "the hold to lift")        # another body than during the hold: no 422
        assert REPLAYED not in after.headers
        again = o.chat.completions.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=6,
                                                            extra_headers={"Idempotency-Key": "h"})
        assert again.headers[REPLAYED] == "true" and again.http_response.content == after.http_response.content
    finally:
        server.stop()
