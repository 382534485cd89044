"""`truncation: "auto"` drops the oldest context items, but never a function_call while keeping its
function_call_output (an orphan output the chat template would render without its call): a call and its
output go as a pair. A call the new input answers is never dropped; if it cannot be kept, the request is a
400 naming the context."""
from __future__ import annotations

import pytest

from .conftest import ContextService, call, openai_error, stored_app

pytestmark = pytest.mark.asyncio(loop_scope="session")
MODEL = "smollm2-135m-instruct"


class ArgsCountService(ContextService):
    """As ContextService, and a tool call's arguments count too (one token per character)."""

    def chat_prompt(self, messages, tools=(), tool_choice=None, primer=""):
        ids = super().chat_prompt(messages, tools, tool_choice, primer)
        ids += [1] * sum(len(tc.arguments) for m in messages for tc in m.tool_calls)
        self.prompts.append((list(messages), len(ids)))
        return ids

    def asked(self) -> list:
        """The messages of the prompt the engine was last given (truncation builds several to choose)."""
        n = len(self.submitted[-1][0])
        return [messages for messages, size in self.prompts if size == n][-1]


@pytest.fixture
def service():
    s = ArgsCountService()
    s.prompts = []
    return s


@pytest.fixture
def client(service, runtime):
    return stored_app(service, runtime.stored).test_client()


def _call(call_id: str, size: int) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather",
            "arguments": '{"city": "' + "x" * size + '"}'}


def _output(call_id: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": "sunny"}


def _msg(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


def _orphans(messages) -> list[str]:
    called = {tc.id for m in messages for tc in m.tool_calls}
    return [m.tool_call_id for m in messages if m.role == "tool" and m.tool_call_id not in called]


async def test_auto_truncation_drops_a_function_call_and_its_output_together(client, service):
    # dropping "a" alone does not fit; dropping "a" and the (large) call would, but orphans the output
    items = [_msg("a" * 10), _call("call_1", 200), _output("call_1"), _msg("b" * 50)]
    status, conv = await call(client, "POST", "/v1/conversations", {"items": items})
    assert status == 200, conv
    status, r = await call(client, "POST", "/v1/responses", {"model": MODEL, "input": "c" * 150,
                                                             "conversation": conv["id"], "truncation": "auto"})
    assert status == 200, r
    messages = service.asked()
    assert _orphans(messages) == []
    assert [m.content for m in messages] == ["b" * 50, "c" * 150]


async def test_a_call_the_input_answers_is_kept_or_the_request_is_refused(client, service):
    # the new input answers call_1: the call must stay, so only "a" may go
    items = [_msg("a" * 350), _call("call_1", 20), _msg("b" * 20)]
    status, conv = await call(client, "POST", "/v1/conversations", {"items": items})
    assert status == 200, conv
    status, r = await call(client, "POST", "/v1/responses", {"model": MODEL, "input": [_output("call_1")],
                                                             "conversation": conv["id"], "truncation": "auto"})
    assert status == 200, r
    messages = service.asked()
    assert _orphans(messages) == [] and [m.role for m in messages] == ["assistant", "user", "tool"]
    # a call too large to keep beside its answer: refused, naming the context, nothing run
    items = [_msg("a" * 10), _call("call_2", 390)]
    _, conv = await call(client, "POST", "/v1/conversations", {"items": items})
    submitted = len(service.submitted)
    got = await call(client, "POST", "/v1/responses", {"model": MODEL, "input": [_output("call_2")],
                                                       "conversation": conv["id"], "truncation": "auto"})
    assert openai_error(got, 400, "conversation")["code"] == "context_length_exceeded"
    assert len(service.submitted) == submitted
