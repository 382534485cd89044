"""A keyed first attempt cut by SIGKILL of `aotx serve` mid-stream: after the restart (and after a second one) a
repeat with that key is told, in its surface's envelope, that the attempt was interrupted — it is never run again
and never answered with the part that was streamed as if it were whole. Both SDKs."""
from __future__ import annotations

import anthropic
import openai
import pytest

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess

MODEL = "smollm2-135m-instruct"
STORY = [{"role": "user", "content": "Write a very long story about the sea."}]
H_CHAT, H_MSG = {"Idempotency-Key": "story-chat"}, {"Idempotency-Key": "story-msg"}


def _chat(url: str):
    o = openai.OpenAI(base_url=f"{url}/v1", api_key="key-a", max_retries=0, timeout=120)
    return o.chat.completions.create(model=MODEL, messages=STORY, max_tokens=400, stream=True, extra_headers=H_CHAT)


def _message(url: str):
    a = anthropic.Anthropic(base_url=url, api_key="key-a", max_retries=0, timeout=120)
    return a.messages.create(model=MODEL, messages=STORY, max_tokens=400, stream=True, extra_headers=H_MSG)


def test_a_first_attempt_cut_by_sigkill_is_answered_interrupted_after_each_restart(tmp_path):
    var = tmp_path / "var"
    server = ServerProcess(*SERVER_ARGS, var=var).start()
    try:
        chat, message = _chat(server.base_url), _message(server.base_url)
        assert next(iter(chat)).object == "chat.completion.chunk"      # both admitted (their keys saved) and running
        assert next(iter(message)).type == "message_start"
    finally:
        server.proc.kill()   # SIGKILL: no shutdown path runs
        server.proc.wait()
    for _ in range(2):
        server = ServerProcess(*SERVER_ARGS, var=var).start()
        try:
            with pytest.raises(openai.ConflictError) as cut:
                list(_chat(server.base_url))
            assert cut.value.body["code"] == "idempotency_key_interrupted"
            assert cut.value.body["param"] == "Idempotency-Key" and "interrupted" in cut.value.body["message"]
            with pytest.raises(anthropic.ConflictError) as cut_msg:
                list(_message(server.base_url))
            err = cut_msg.value.response.json()
            assert err["type"] == "error" and "interrupted" in err["error"]["message"]
        finally:
            server.stop()
