"""A generation the shutdown stopped (the engine ends it with ENGINE_STOPPED) is a retryable 503 on
every surface: a native error event mid-stream (OpenAI `server_error`, Anthropic `overloaded_error`,
Responses `error` + `response.failed` with the numbering continued) and a native 503 buffered;
any other engine failure stays a 500."""
from __future__ import annotations

import pytest

from aotx.engine import ENGINE_STOPPED
from api.errors import ApiError, engine_failure
from api.surfaces.chat.buffered import build_chat_completion
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.completions.buffered import build_completion
from api.surfaces.completions.stream import CompletionStreamProjector
from api.surfaces.messages.buffered import build_message
from api.surfaces.messages.stream import MessagesStreamProjector
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.stream import ResponsesStreamProjector
from tests.api.tapes import CASES, tape
from tests.api.test_tape_projections import (chat_args, completion_args, messages_args, responses_args,
                                             run)
from tests.api.validators import (parse_sse, validate_chat_stream, validate_completion_stream,
                                  validate_messages_stream, validate_responses_stream)

STOPPED = tape(["Hi", " there"], finish="error", error=ENGINE_STOPPED)
PLAIN = CASES[0]   # a text case without tools: only its projector arguments are used


def test_engine_failure_maps_the_stop_to_503_and_the_rest_to_500():
    stopped = engine_failure(ENGINE_STOPPED)
    assert stopped.status == 503 and stopped.should_retry and "shutting down" in stopped.message
    other = engine_failure("device lost")
    assert other.status == 500 and not other.should_retry and other.message == "Generation failed: device lost"


def test_chat_and_completions_streams_end_with_a_server_error_object():
    result = validate_chat_stream(run(ChatStreamProjector(**chat_args(PLAIN), n=1, include_usage=False),
                                      [STOPPED]), include_usage=False)
    assert result["error"]["type"] == "server_error" and "shutting down" in result["error"]["message"]
    assert result["error"]["code"] == "server_shutting_down"
    result = validate_completion_stream(run(CompletionStreamProjector(**completion_args(PLAIN),
                                                                      include_usage=False), [STOPPED]),
                                        include_usage=False)
    assert result["error"]["type"] == "server_error" and "shutting down" in result["error"]["message"]


def test_messages_stream_ends_with_overloaded_error():
    result = validate_messages_stream(run(MessagesStreamProjector(**messages_args(PLAIN)), [STOPPED]))
    assert result["error"]["type"] == "overloaded_error" and "shutting down" in result["error"]["message"]


def test_responses_stream_ends_failed_with_its_numbering_continued():
    raw = run(ResponsesStreamProjector(**responses_args(PLAIN)), [STOPPED])
    result = validate_responses_stream(raw)
    assert result["terminal"] == "response.failed" and result["final"]["status"] == "failed"
    events = [data for _, data in parse_sse(raw)]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-2]["type"] == "error" and events[-2]["code"] == "server_error"
    assert "shutting down" in events[-2]["message"]
    assert events[-1]["response"]["error"]["message"] == events[-2]["message"]


@pytest.mark.parametrize("build", [
    lambda: build_chat_completion([STOPPED], **chat_args(PLAIN)),
    lambda: build_completion([STOPPED], **completion_args(PLAIN)),
    lambda: build_message(STOPPED, **messages_args(PLAIN)),
    lambda: build_response(STOPPED, **responses_args(PLAIN)),
], ids=["chat", "completions", "messages", "responses"])
def test_buffered_requests_answer_503(build):
    with pytest.raises(ApiError) as caught:
        build()
    assert caught.value.status == 503 and "shutting down" in caught.value.message
