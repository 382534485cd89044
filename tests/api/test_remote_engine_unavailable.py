"""An HTTP worker's app (the wire surfaces over aotx.serving_remote) whose engine process is not there or goes
away: a precise 503 in each surface's own envelope, never a hang (real nats-server, real model)."""
from __future__ import annotations

import asyncio
import secrets

import pytest

from aotx.engine_service import EngineService
from aotx.serving_remote import EngineClient, RemoteModelService
from api.app import create_app
from api.settings import GatewaySettings
from tests.conftest import started_service
from tests.waiting import wait_until_async

MODEL = "smollm2-135m-instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Count from one to one thousand."}],
        "max_tokens": 2000}
MESSAGES = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}


@pytest.fixture(scope="module")
def service(model_bundle):
    yield from started_service(model_bundle, max_batch=8, kv_pages=512, default_max_tokens=32)


async def _worker_app(model_bundle, service, nats_url: str, name: str):
    client = await EngineClient(nats_url, name).start()
    remote = RemoteModelService(model_bundle, client, model_id=MODEL, backend_name="numpy", created=0,
                                context_tokens=service.context_tokens, default_max_tokens=32)
    return create_app(remote, GatewaySettings()), client


async def test_no_engine_answers_503_in_each_envelope(model_bundle, service, nats_url):
    app, client = await _worker_app(model_bundle, service, nats_url, secrets.token_hex(4))
    try:
        tc = app.test_client()
        for body in (CHAT, {**CHAT, "stream": True}):
            r = await tc.post("/v1/chat/completions", json=body)
            assert r.status_code == 503
            assert (await r.get_json())["error"]["code"] == "engine_unavailable"
        r = await tc.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 4})
        assert r.status_code == 503 and (await r.get_json())["error"]["type"] == "server_error"
        r = await tc.post("/v1/messages", json=MESSAGES)
        got = await r.get_json()
        assert r.status_code == 503 and got["type"] == "error" and got["error"]["type"] == "overloaded_error"
    finally:
        await client.stop()


async def test_an_engine_that_goes_away_mid_generation_is_503(model_bundle, service, nats_url):
    name = secrets.token_hex(4)
    engine = await EngineService(service, nats_url, name).start()
    app, client = await _worker_app(model_bundle, service, nats_url, name)
    try:
        tc = app.test_client()
        pending = asyncio.ensure_future(tc.post("/v1/chat/completions", json=CHAT))
        await wait_until_async(lambda: engine.generations == 1, "the generation to start")
        await engine.stop()   # silent from now on: the worker ends the generation within ENGINE_TIMEOUT
        r = await pending
        body = await r.get_json()
        assert r.status_code == 503 and body["error"]["code"] == "engine_unavailable", body
    finally:
        await client.stop()
