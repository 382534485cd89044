"""The stored-state flags of `aotx serve` reach the running server (ops/stored_args.py): small tables refuse with
a 400 `stored_limit_reached` in the surface's own envelope (OpenAI's, Anthropic's on /v1/messages) and run
nothing, one command over `--stored-max-command-bytes` is a 413, and a response past `--response-ttl` reads as
unknown (404) — observed by polling with a deadline, never by sleeping."""
from __future__ import annotations

import re

import anthropic
import httpx
import openai
import pytest

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess
from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
LIMITS = ("--stored-max-conversations", "1", "--stored-max-keys", "1", "--stored-max-command-bytes", "4KiB",
          "--response-ttl", "1s")


@pytest.fixture(scope="module")
def limited():
    server = ServerProcess(*SERVER_ARGS, *LIMITS).start()
    try:
        yield server.base_url
    finally:
        server.stop()


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="limits-key", max_retries=0, timeout=120)


def _handed_to_the_engine(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(int(n) for n in re.findall(r"^aotx_route_requests_total\{[^}]*\} (\d+)\.0$", text, re.MULTILINE))


def test_small_tables_refuse_with_a_native_400_and_run_nothing(limited):
    o = _openai(limited)
    o.conversations.create(metadata={"n": "1"})
    with pytest.raises(openai.BadRequestError) as full:
        o.conversations.create(metadata={"n": "2"})
    assert full.value.body["code"] == "stored_limit_reached" and "conversations" in full.value.body["message"]
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    o.chat.completions.create(**chat, extra_headers={"Idempotency-Key": "first"})
    ran = _handed_to_the_engine(limited)
    with pytest.raises(openai.BadRequestError) as keys:
        o.chat.completions.create(**chat, extra_headers={"Idempotency-Key": "second"})
    assert keys.value.body["code"] == "stored_limit_reached" and "keys" in keys.value.body["message"]
    a = anthropic.Anthropic(base_url=limited, api_key="limits-key", max_retries=0, timeout=120)
    with pytest.raises(anthropic.BadRequestError) as msg:
        a.messages.create(model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "Hi"}],
                          extra_headers={"Idempotency-Key": "third"})
    err = msg.value.response.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert "full" in err["error"]["message"]
    assert _handed_to_the_engine(limited) == ran >= 1


def test_one_command_over_the_command_bytes_is_a_413(limited):
    o = _openai(limited)
    with pytest.raises(openai.APIStatusError) as big:
        o.responses.create(model=MODEL, input="Hi", max_output_tokens=2,
                           metadata={f"k{i}": "x" * 500 for i in range(16)})
    assert big.value.status_code == 413


def test_a_response_past_the_response_ttl_reads_as_unknown(limited):
    o = _openai(limited)
    r = o.responses.create(model=MODEL, input="Hi", max_output_tokens=2)
    assert r.store is True

    def gone() -> bool:
        try:
            o.responses.retrieve(r.id)
        except openai.NotFoundError:
            return True
        return False

    wait_until(gone, "the response to expire after --response-ttl 1s", timeout=60)
    with pytest.raises(openai.NotFoundError):
        o.responses.input_items.list(r.id)
