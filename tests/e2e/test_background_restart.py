"""Background responses across restarts of `aotx serve` (one state directory): a run cut by kill -9 is
`failed` with the restart error, its saved events stay readable and it never runs again; a run ended
by a clean shutdown (SIGTERM, no grace) is `failed` with the shutting-down error, journalled before
the process exited."""
from __future__ import annotations

import json
import os
import signal

import openai

from tests.server_process import ServerProcess
from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
ARGS = ("--max-batch", "4", "--kv-pages", "256", "--default-max-tokens", "8", "--shutdown-grace", "0")
LONG = "Write a very long story about a dragon who learns to fly, with many chapters."


def _client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


def _events(client: openai.OpenAI, rid: str) -> list[dict]:
    return [json.loads(e.model_dump_json()) for e in client.responses.retrieve(rid, stream=True)]


def test_kill9_then_sigterm_end_running_background_responses(tmp_path):
    var = tmp_path / "var"
    first = ServerProcess(*ARGS, var=var).start()
    try:
        client = _client(first)
        stream = client.responses.create(model=MODEL, input=LONG, background=True, stream=True,
                                         max_output_tokens=2000)
        read = []
        for event in stream:
            read.append(json.loads(event.model_dump_json()))
            if len(read) == 12:
                break
        rid = read[0]["response"]["id"]
        os.kill(first.proc.pid, signal.SIGKILL)   # kill -9 mid-run
        first.proc.wait()
    finally:
        first.stop()

    second = ServerProcess(*ARGS, var=var).start()
    try:
        client = _client(second)
        cut = client.responses.retrieve(rid)
        assert cut.status == "failed" and cut.background is True
        assert "interrupted by a restart" in cut.error.message
        saved = _events(client, rid)
        assert saved[:len(read)] == read                       # what a client saw was saved
        assert [e["sequence_number"] for e in saved] == list(range(len(saved)))
        assert _events(client, rid) == saved                   # never run again
        assert client.responses.retrieve(rid).status == "failed"

        r = client.responses.create(model=MODEL, input=LONG, background=True, max_output_tokens=2000)
        wait_until(lambda: client.responses.retrieve(r.id), "the second run to generate",
                   done=lambda x: x.status == "in_progress")
        second.proc.send_signal(signal.SIGTERM)                # clean shutdown, grace 0
        assert second.wait_exit(60) == 0
    finally:
        second.stop()

    third = ServerProcess(*ARGS, var=var).start()
    try:
        client = _client(third)
        ended = client.responses.retrieve(r.id)
        assert ended.status == "failed" and "shutting down" in ended.error.message, ended.error
        events = _events(client, r.id)
        assert events[-1]["type"] == "response.failed" and events[-2]["type"] == "error"
        assert client.responses.retrieve(rid).status == "failed"
    finally:
        third.stop()
