"""The stored surfaces in process: the real blueprints over a tape-replaying service (tests.api.fake_service)
and a real SharedRuntime's stored port on a real nats-server (one stream per test)."""
from __future__ import annotations

import itertools
import json

import pytest

from aotx.runtime import SharedRuntime
from api.settings import GatewaySettings
from api.stored_access import attach_stored
from api.surfaces import conversations
from eventlog import StreamSpec
from tests.api.fake_service import FakeService, make_app

_N = itertools.count()
A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}


class ContextService(FakeService):
    """A fake whose prompt is one token per character of every message (and a small context), so that
    what the engine was asked is visible (`chat_calls`) and a long chain does not fit."""

    context_tokens = 400

    def chat_prompt(self, messages, tools=(), tool_choice=None, primer=""):
        super().chat_prompt(messages, tools, tool_choice, primer)
        return [1] * sum(len(m.content) + 1 for m in messages)


def stored_app(service, port):
    app = make_app(service)
    app.config["AOTX_SETTINGS"] = GatewaySettings()
    app.register_blueprint(conversations.blueprint)
    if port is not None:
        attach_stored(app, port)
    return app


@pytest.fixture
async def runtime(nats_url):
    n = next(_N)
    rt = await SharedRuntime(nats_url, StreamSpec(name=f"SSURF_{n}", subject_prefix=f"ssurf{n}.j"),
                             progress=False).start()
    try:
        yield rt
    finally:
        await rt.stop()


@pytest.fixture
def service():
    return ContextService()


@pytest.fixture
def client(service, runtime):
    return stored_app(service, runtime.stored).test_client()


async def call(client, method: str, path: str, body=None, headers=A):
    resp = await client.open(path, method=method, json=body, headers=headers)
    return resp.status_code, json.loads(await resp.get_data())


def openai_error(status_body, status: int, param=None) -> dict:
    code, body = status_body
    assert code == status, body
    assert set(body) == {"error", "request_id"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    if param is not None:
        assert body["error"]["param"] == param, body
    return body["error"]


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
