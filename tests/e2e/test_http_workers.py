"""`aotx serve --http-workers 2` end to end (the real model, the official SDKs): every model surface buffered and
streamed through the workers, a client disconnect cancels its generation, kill -9 of a worker (the other keeps
serving, the engine cancels the dead worker's generations, the main process starts it again and the new
one serves), then SIGTERM leaves no process behind and restarts nothing.
The stored surfaces' and Idempotency-Key end-to-end tests (tests/e2e/test_stored_responses.py,
test_idempotency_keys.py) run first on the same server, unchanged, so that the one-writer guarantees are
checked with the requests coming through the workers (one server start for both: test time).
The tests of this module run in order on one server; the last two end it."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal

import anthropic
import httpx
import openai
import pytest

from tests.conftest import SERVER_ARGS
from tests.e2e.test_idempotency_keys import (  # noqa: F401  (run here, against the workers, first)
    test_a_repeat_is_the_saved_answer_with_the_replay_header, test_concurrent_duplicates_share_one_generation_on_both_sdks)
from tests.e2e.test_stored_responses import (  # noqa: F401
    other_client, test_conversations_and_a_response_appended_to_one, test_create_retrieve_input_items_delete,
    test_previous_response_id_chain_with_a_function_tool_round_trip)
from tests.server_process import ServerProcess
from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
WORKERS = re.compile(r"(\d+) HTTP workers ([\d ]+)\)")
# greedy counting never reaches EOS: a stream that runs until it is cancelled (or 1,000 tokens)
LONG = {"model": MODEL, "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "temperature": 0, "max_tokens": 1000,
        "stream": True}
LONG_PATH = "/v1/completions"


@pytest.fixture(scope="module")
def server():
    proc = ServerProcess(*SERVER_ARGS, "--http-workers", "2", "--log-level", "info").start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def base_url(server) -> str:
    return server.base_url


@pytest.fixture(scope="module")
def served(server) -> str:   # the idempotency tests' name for it
    return server.base_url


@pytest.fixture(scope="module")
def openai_client(base_url):   # the stored tests' client, on this module's server (conftest's is the session's)
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


def _workers(server) -> list[int]:
    m = next(WORKERS.search(line) for line in server.stderr_lines if WORKERS.search(line))
    pids = [int(p) for p in m.group(2).split()]
    assert len(pids) == int(m.group(1)) == 2
    return pids


def _oa(base_url: str) -> openai.OpenAI:   # a fresh client: its own connections
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


def _engine(base_url: str) -> dict:
    return httpx.get(f"{base_url}/v1/stats", timeout=30).json()["engine"]


def _cancelled(base_url: str) -> int:
    return _engine(base_url)["finished"].get("cancelled", 0)


def _polled(look):
    """`look()`, or None where the connection was reset: one that reached a worker's socket as the worker
    died (SIGKILL) is reset by the kernel, and the next look reaches a live worker."""
    try:
        return look()
    except httpx.TransportError:
        return None


def test_every_surface_buffered_and_streamed(base_url):
    oa = _oa(base_url)
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    chat = oa.chat.completions.create(model=MODEL, messages=ask, temperature=0, max_tokens=12)
    assert "Paris" in chat.choices[0].message.content and chat.usage.completion_tokens > 0
    streamed = "".join(c.choices[0].delta.content or "" for c in oa.chat.completions.create(
        model=MODEL, messages=ask, temperature=0, max_tokens=12, stream=True) if c.choices)
    assert streamed == chat.choices[0].message.content
    two = oa.chat.completions.create(model=MODEL, messages=ask, max_tokens=4, n=2)
    assert [c.index for c in two.choices] == [0, 1]
    comp = oa.completions.create(model=MODEL, prompt="The capital of France is", temperature=0, max_tokens=6)
    streamed = "".join(c.choices[0].text for c in oa.completions.create(
        model=MODEL, prompt="The capital of France is", temperature=0, max_tokens=6, stream=True))
    assert comp.choices[0].text and streamed == comp.choices[0].text
    an = anthropic.Anthropic(base_url=base_url, api_key="any-key", max_retries=0, timeout=120)
    msg = an.messages.create(model=MODEL, max_tokens=12, messages=ask, extra_body={"temperature": 0})
    with an.messages.stream(model=MODEL, max_tokens=12, messages=ask, extra_body={"temperature": 0}) as s:
        assert s.get_final_text() == msg.content[0].text
    r = oa.responses.create(model=MODEL, input="What is the capital of France?", temperature=0, max_output_tokens=12)
    assert oa.responses.retrieve(r.id).output_text == r.output_text   # stored: the main process keeps it
    events = [e.type for e in oa.responses.create(model=MODEL, input="Hi", max_output_tokens=6, store=False,
                                                  stream=True)]
    assert events[0] == "response.created" and events[-1] in ("response.completed", "response.incomplete")
    assert [m.id for m in oa.models.list()] == [MODEL]
    assert httpx.get(f"{base_url}/health").json()["model"] == MODEL


def test_the_main_process_metrics_count_what_the_workers_served(base_url):
    """/metrics is forwarded to the main process, whose engine ran every generation of the test above."""
    from prometheus_client.parser import text_string_to_metric_families
    text = httpx.get(f"{base_url}/metrics", timeout=30).text
    counts = {(s.labels["surface"], s.labels["lane"]): s.value for f in text_string_to_metric_families(text)
              for s in f.samples if s.name == "aotx_request_duration_seconds_count"}
    assert counts[("chat", "buffered")] >= 3 and counts[("chat", "stream")] >= 1
    assert counts[("completions", "stream")] >= 1 and counts[("messages", "stream")] >= 1


def test_structured_outputs_sampling_extras_and_defaults_cross_the_worker_hop(base_url):
    """What a worker parses reaches the engine process whole: a json_schema constraint (compiled
    again there from its grammar), logit_bias and penalties, and the model's default sampling."""
    import jsonschema
    from pydantic import BaseModel

    class Person(BaseModel):
        name: str
        age: int

    oa = _oa(base_url)
    parsed = oa.chat.completions.parse(model="smollm2-135m-instruct", max_tokens=60, response_format=Person,
                                       messages=[{"role": "user", "content": "Describe a person as JSON."}])
    choice = parsed.choices[0]
    assert choice.finish_reason == "stop", choice
    jsonschema.validate(json.loads(choice.message.content), Person.model_json_schema())
    forced = oa.chat.completions.create(model="smollm2-135m-instruct", max_tokens=3, temperature=0,
                                        logit_bias={"504": 100}, presence_penalty=1.0,
                                        messages=[{"role": "user", "content": "Hi"}])
    assert forced.choices[0].message.content == "TheTheThe"   # token 504 is "The": +100 forces it
    models = httpx.get(f"{base_url}/v1/models", timeout=30).json()["data"]
    assert models[0]["sampling_defaults"] == {"temperature": 0.2, "top_p": 0.9}


def test_a_forwarded_answer_is_the_one_the_worker_would_give(base_url):
    """A Responses request that stores nothing runs in the worker; with an Idempotency-Key it is forwarded to
    the main process: same status, header names in the same order, same body but its ids and times."""
    body = {"model": MODEL, "input": "What is the capital of France?", "temperature": 0, "max_output_tokens": 8,
            "store": False}
    local = httpx.post(f"{base_url}/v1/responses", json=body, timeout=120)
    forwarded = httpx.post(f"{base_url}/v1/responses", json=body, headers={"Idempotency-Key": "k-forwarded-1"},
                           timeout=120)
    assert local.status_code == forwarded.status_code == 200
    assert list(local.headers.keys()) == list(forwarded.headers.keys())

    def shape(r):
        doc = {k: v for k, v in r.json().items() if k not in ("id", "created_at", "completed_at")}
        return {**doc, "output": [{k: v for k, v in o.items() if k != "id"} for o in doc["output"]]}

    assert shape(local) == shape(forwarded)


def test_a_client_disconnect_cancels_the_generation(base_url):
    before = _cancelled(base_url)
    with httpx.stream("POST", f"{base_url}{LONG_PATH}", json=LONG, timeout=120) as r:
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
    wait_until(lambda: _cancelled(base_url) > before, "the engine to cancel the left stream")
    wait_until(lambda: _engine(base_url)["running"] == 0, "nothing left running")


def test_sighup_reloads_the_config_in_main_and_in_every_worker(server, base_url):
    token = next((server.var / "tokens").glob("alice*")).read_text().strip()
    shared = f"{base_url}/aotx/v1/shared/participant"
    assert httpx.get(shared, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    server.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: [line for line in server.stderr_lines if "reloaded" in line], "main and both workers to reload",
               done=lambda lines: len(lines) >= 3)
    for _ in range(4):   # whichever worker answers: its grants still match the runtime's
        assert httpx.get(shared, headers={"Authorization": f"Bearer {token}"}).status_code == 200


def _open_stream(base_url: str) -> http.client.HTTPConnection:
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", LONG_PATH, body=json.dumps(LONG), headers={"content-type": "application/json"})
    conn.resp = conn.getresponse()
    assert conn.resp.status == 200 and conn.resp.readline().startswith(b"data:")
    return conn


def _holder(conn: http.client.HTTPConnection, pids: list[int]) -> int:
    """The worker whose socket serves this connection (/proc/net/tcp and /proc/PID/fd)."""
    client_port, server_port = conn.sock.getsockname()[1], conn.sock.getpeername()[1]
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if int(cols[1].split(":")[1], 16) == server_port and int(cols[2].split(":")[1], 16) == client_port:
                inodes.add(f"socket:[{cols[9]}]")
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return pid
            except FileNotFoundError:
                continue
    raise AssertionError(f"no worker holds the connection from port {client_port}")


def test_kill_9_of_a_worker_the_other_keeps_serving_and_its_generations_are_cancelled(server, base_url):
    pids = _workers(server)
    conns = [_open_stream(base_url) for _ in range(4)]
    holders = [_holder(c, pids) for c in conns]
    victim = holders[0]
    lost = holders.count(victim)
    before = _cancelled(base_url)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: _polled(lambda: _cancelled(base_url)),
               f"the engine to cancel the {lost} generation(s) of the dead worker {victim}",
               done=lambda n: n is not None and n >= before + lost)
    assert any(re.search(rf"http worker \d+-{victim} silent for .*: {lost} generation", line)
               for line in server.stderr_lines)
    for conn, holder in zip(conns, holders):
        if holder != victim:   # the other worker's streams go on
            assert conn.resp.readline()
        conn.close()
    for _ in range(4):   # new connections reach the live worker only
        got = _oa(base_url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=3)
        assert got.choices[0].finish_reason in ("length", "stop")
    wait_until(lambda: _engine(base_url)["running"] == 0, "the closed streams to be cancelled")


def _workers_doc(base_url: str) -> dict:
    return httpx.get(f"{base_url}/v1/stats", timeout=30).json()["http_workers"]


def _served_by(base_url: str, pids: list[int]) -> int:
    """The worker that answers a fresh connection's /health."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("GET", "/health")
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["model"] == MODEL
        return _holder(conn, pids)
    finally:
        conn.close()


def test_the_killed_worker_is_started_again_and_serves(server, base_url):
    first = _workers(server)   # the ready line's pids: one of them was killed above
    doc = wait_until(lambda: _polled(lambda: _workers_doc(base_url)), "the main process to start the dead worker again",
                     done=lambda d: d is not None and d["restarts"] >= 1 and len(d["pids"]) == 2)
    assert doc["exits"] == 1 and doc["given_up"] == [] and doc["workers"] == 2
    new = [p for p in doc["pids"] if p not in first]
    assert len(new) == 1, doc
    assert any(re.search(r"HTTP worker \d \(pid \d+\) exited with -9; 1 worker\(s\) keep serving; restarting", line)
               for line in server.stderr_lines)
    wait_until(lambda: _served_by(base_url, doc["pids"]), f"the new worker {new[0]} to serve a connection",
               done=lambda pid: pid == new[0])
    for _ in range(2):   # through either worker: the engine serves the new one as the old
        got = _oa(base_url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=3)
        assert got.choices[0].finish_reason in ("length", "stop")


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = {int(k) for k in f.read().split()}
                todo += list(kids - out)
                out |= kids
        except FileNotFoundError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_leaves_no_process_behind_and_restarts_nothing(server, base_url):
    live = _workers_doc(base_url)["pids"]
    pids = set(live) | _descendants(server.proc.pid)   # live workers (the killed one is gone), nats
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait_exit(timeout=60) == 0
    wait_until(lambda: [p for p in pids if _alive(p)], "every process of the server to end", done=lambda a: not a)
    assert sum("started again" in line for line in server.stderr_lines) == 1   # the one restart above, no other
