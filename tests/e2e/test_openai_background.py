"""Background responses through the official openai SDK against `aotx serve` (issue 11 part 4):
create(background=True) and poll, background + stream with a dropped connection resumed by
retrieve(stream=True, starting_after=N), a second reader, cancel, foreign keys, bad input."""
from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from tests.waiting import wait_until, wait_until_async

MODEL = "smollm2-135m-instruct"
LONG = "Write a very long story about a dragon who learns to fly, with many chapters."
TERMINAL = ("completed", "incomplete", "failed", "cancelled")


def _other(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="another-key", max_retries=0, timeout=120)


def _async_client(base_url: str) -> openai.AsyncOpenAI:
    """An async client opened and closed inside one test (its own event loop)."""
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


def _events_json(events) -> list[dict]:
    return [json.loads(e.model_dump_json()) for e in events]


def _text(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def test_background_answers_at_once_then_polls_to_completed(openai_client):
    r = openai_client.responses.create(model=MODEL, input="What is the capital of France?", background=True,
                                       temperature=0, max_output_tokens=16)
    assert r.status in ("queued", "in_progress") and r.background is True and r.store is True
    assert r.id.startswith("resp_") and r.output == []
    done = wait_until(lambda: openai_client.responses.retrieve(r.id), "the background response to finish",
                      done=lambda x: x.status in TERMINAL)
    assert done.status in ("completed", "incomplete") and done.background is True
    assert done.output_text and done.usage.output_tokens > 0
    buffered = openai_client.responses.create(model=MODEL, input="What is the capital of France?",
                                              temperature=0, max_output_tokens=16)
    assert done.output_text == buffered.output_text


async def test_stream_dropped_then_resumed_exactly(base_url):
    async with _async_client(base_url) as client:
        await _dropped_then_resumed(client)


async def _dropped_then_resumed(client) -> None:
    stream = await client.responses.create(model=MODEL, input="Count from 1 to 40, one number per line.",
                                           background=True, stream=True, temperature=0, max_output_tokens=96)
    first = []
    async for event in stream:
        first.append(event)
        if len(first) == 6:
            break
    await stream.close()   # the connection drops; the run goes on
    rid, n = first[0].response.id, first[-1].sequence_number
    assert [e.sequence_number for e in first] == list(range(6))
    assert first[0].type == "response.created" and first[0].response.status == "queued"
    assert first[0].response.background is True

    async def read(**kw) -> list:
        got = await client.responses.retrieve(rid, stream=True, **kw)
        return [e async for e in got]

    # two concurrent readers of the (likely still live) run: one resuming after N, one from the start
    resumed, full = await asyncio.gather(read(starting_after=n), read())
    assert [e.sequence_number for e in resumed] == list(range(n + 1, n + 1 + len(resumed)))
    assert _events_json(first) + _events_json(resumed) == _events_json(full)
    assert [e.sequence_number for e in full] == list(range(len(full)))
    assert full[-1].type in ("response.completed", "response.incomplete")
    final = await client.responses.retrieve(rid)
    assert _text(_events_json(full)) == final.output_text != ""
    assert json.loads(full[-1].response.model_dump_json())["output"] == \
        json.loads(final.model_dump_json())["output"]
    # a finished run replays the same events again, and from any point
    again = await read(starting_after=2)
    assert _events_json(again) == _events_json(full)[3:]


def _stats(base_url: str) -> dict:
    return httpx.get(f"{base_url}/v1/stats").json()["engine"]


def test_cancel_stops_the_run(openai_client, base_url):
    # temperature 1.0 explicitly: a long ramble, still running when the cancel arrives (the model's default
    # 0.2 may end it sooner)
    r = openai_client.responses.create(model=MODEL, input=LONG, background=True, max_output_tokens=2000,
                                       temperature=1.0)
    wait_until(lambda: openai_client.responses.retrieve(r.id), "the run to be generating",
               done=lambda x: x.status == "in_progress")
    cancelled = openai_client.responses.cancel(r.id)
    assert cancelled.status == "cancelled" and cancelled.id == r.id
    assert openai_client.responses.retrieve(r.id).status == "cancelled"
    wait_until(lambda: _stats(base_url), "the engine to stop generating for it",
               done=lambda s: s["kv_pages_in_use"] == 0)
    events = list(openai_client.responses.retrieve(r.id, stream=True))
    assert events and events[-1].type not in ("response.completed", "response.incomplete")
    # cancelling again (or a finished response) answers the final object as it is
    assert openai_client.responses.cancel(r.id).status == "cancelled"


def test_cancel_of_a_finished_response_answers_it(openai_client):
    r = openai_client.responses.create(model=MODEL, input="Say hi.", background=True, max_output_tokens=4)
    done = wait_until(lambda: openai_client.responses.retrieve(r.id), "the background response to finish",
                      done=lambda x: x.status in TERMINAL)
    again = openai_client.responses.cancel(r.id)
    assert again.status == done.status and again.output_text == done.output_text


def test_foreign_and_unknown_ids_are_404(openai_client, base_url):
    r = openai_client.responses.create(model=MODEL, input="Say hi.", background=True, max_output_tokens=4)
    other = _other(base_url)
    for call in (lambda c, i: c.responses.retrieve(i), lambda c, i: c.responses.cancel(i),
                 lambda c, i: list(c.responses.retrieve(i, stream=True))):
        with pytest.raises(openai.NotFoundError):
            call(other, r.id)
        with pytest.raises(openai.NotFoundError):
            call(openai_client, "resp_" + "0" * 48)
    assert openai_client.responses.retrieve(r.id).id == r.id


def test_background_bad_input(openai_client, base_url):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.responses.create(model=MODEL, input="hi", background=True, store=False)
    assert exc.value.param == "background"
    with pytest.raises(openai.BadRequestError):
        openai_client.responses.create(model=MODEL, input="hi", extra_body={"background": "yes"})
    r = openai_client.responses.create(model=MODEL, input="Say hi.", background=True, max_output_tokens=4)
    for bad in ("-1", "x", "1.5"):
        got = httpx.get(f"{base_url}/v1/responses/{r.id}", params={"stream": "true", "starting_after": bad})
        assert got.status_code == 400, got.text
        assert got.json()["error"]["param"] == "starting_after"


async def test_second_reader_waits_for_the_live_run(base_url):
    async with _async_client(base_url) as aclient:
        await _reader_of_a_live_run(aclient)


async def _reader_of_a_live_run(aclient) -> None:
    r = await aclient.responses.create(model=MODEL, input="Count from 1 to 30.", background=True,
                                                   temperature=0, max_output_tokens=48)
    got = await aclient.responses.retrieve(r.id, stream=True)
    events = [e async for e in got]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[-1].type in ("response.completed",
                                                                        "response.incomplete")
    final = await wait_until_async(lambda: aclient.responses.retrieve(r.id), "the finish",
                                   done=lambda x: x.status in TERMINAL)
    assert _text(_events_json(events)) == final.output_text
