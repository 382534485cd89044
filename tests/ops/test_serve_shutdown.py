"""`aotx serve` shutdown: SIGTERM drains.

Running streams end with their surface's native error event (OpenAI Chat/Completions: a data object
with a top-level `error`; Anthropic: `event: error`; Responses: `error` then `response.failed`, the
sequence_number continued), buffered requests in flight get a native error response, shared SSE
streams end cleanly, and the process exits 0 within a bound — also when the whole process group
(nats-server included) gets the signal, or nats-server was killed -9 first. The bound is a
correctness property here: a shutdown that waits on a reconnect loop never ends.
"""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any, Callable

import anthropic
import httpx
import openai
from tests.server_process import ServerProcess

from .client import SharedClient

ARGS = ("--max-batch", "8", "--kv-pages", "1024", "--default-max-tokens", "48")
MODEL = "smollm2-135m-instruct"
PROMPT = "Write a very long story about the sea."   # greedy: far more than 600 tokens
LONG = 1000      # six such requests fit the KV pool together (about 65 pages each)
EXIT_BOUND = 10.0
RECONNECT_LINE = re.compile(r"nats connection|reconnect", re.IGNORECASE)


class Worker(threading.Thread):
    """Runs fn(started) in a thread; `started` is set by fn once its response has begun (and when
    fn ends, so that nobody waits on a worker that failed first: check `error`)."""

    def __init__(self, fn: Callable[[threading.Event], Any]) -> None:
        super().__init__(daemon=True)
        self.fn, self.started = fn, threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn(self.started)
        except Exception as exc:  # what the client raised is the observation: each test asserts which one
            self.error = exc
        finally:
            self.started.set()

    def outcome(self, timeout: float = 30.0) -> tuple[Any, BaseException | None]:
        self.join(timeout)
        assert not self.is_alive(), "the client never saw the end of its response"
        return self.result, self.error


def _wait(condition: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _engine_requests(base_url: str) -> int:
    engine = httpx.get(f"{base_url}/v1/stats", timeout=10).json()["engine"]
    return engine["running"] + engine["queue_depth"]


def _shared(server: ServerProcess) -> tuple[SharedClient, str, str]:
    token = (server.var / "tokens" / "alice").read_text().strip()
    alice = SharedClient(server.base_url, token)
    alice.sync()
    assert alice.post("/participant")[0] == 201
    status, space = alice.post("/spaces", scope="private")
    assert status == 201, space
    status, con = alice.post(f"/spaces/{space['resource']}/conversations")
    assert status == 201, con
    return alice, con["resource"], token


def _shared_events(base_url: str, con: str, token: str) -> Callable[[threading.Event], str]:
    def read(started: threading.Event) -> str:
        with httpx.stream("GET", f"{base_url}/aotx/v1/shared/conversations/{con}/events",
                          params={"stream": "true"}, headers={"Authorization": f"Bearer {token}"},
                          timeout=httpx.Timeout(60, read=120)) as r:
            assert r.status_code == 200
            started.set()
            return b"".join(r.iter_raw()).decode()   # RemoteProtocolError when cut mid-chunk
    return read


def _log_after(server: ServerProcess, mark: int) -> str:
    return "\n".join(server.stderr_lines[mark:])


def test_sigterm_ends_running_streams_and_requests_with_their_native_errors():
    server = ServerProcess(*ARGS, "--shutdown-grace", "0").start()
    try:
        oc = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="k", max_retries=0, timeout=120)
        ac = anthropic.Anthropic(base_url=server.base_url, api_key="k", max_retries=0, timeout=120)
        messages = [{"role": "user", "content": PROMPT}]

        def chat(started):
            for chunk in oc.chat.completions.create(model=MODEL, messages=messages, stream=True,
                                                    temperature=0, max_tokens=LONG):
                if chunk.choices and chunk.choices[0].delta.content:
                    started.set()

        def completion(started):
            for chunk in oc.completions.create(model=MODEL, prompt="Once upon a time, by the sea,",
                                               stream=True, temperature=0, max_tokens=LONG):
                if chunk.choices and chunk.choices[0].text:
                    started.set()

        def message(started):
            for event in ac.messages.create(model=MODEL, messages=messages, max_tokens=LONG, stream=True,
                                            extra_body={"temperature": 0}):
                if event.type == "content_block_delta":
                    started.set()

        def response(started):
            events = []
            for event in oc.responses.create(model=MODEL, input=PROMPT, stream=True, temperature=0,
                                             max_output_tokens=LONG):
                events.append(event)
                if event.type == "response.output_text.delta":
                    started.set()
            return events

        streams = {name: Worker(fn) for name, fn in
                   (("chat", chat), ("completions", completion), ("messages", message),
                    ("responses", response))}
        buffered = {
            "chat": Worker(lambda _: oc.chat.completions.create(model=MODEL, messages=messages, temperature=0,
                                                                max_tokens=LONG)),
            "messages": Worker(lambda _: ac.messages.create(model=MODEL, messages=messages, max_tokens=LONG,
                                                            extra_body={"temperature": 0})),
        }
        _, con, token = _shared(server)
        shared_sse = Worker(_shared_events(server.base_url, con, token))
        for worker in [*streams.values(), *buffered.values(), shared_sse]:
            worker.start()
        for name, worker in streams.items():
            assert worker.started.wait(180) and worker.error is None, f"the {name} stream never produced text"
        assert shared_sse.started.wait(60) and shared_sse.error is None
        _wait(lambda: _engine_requests(server.base_url) >= 6, "six requests in the engine")
        mark = len(server.stderr_lines)

        server.proc.send_signal(signal.SIGTERM)
        began = time.monotonic()
        code = server.wait_exit(EXIT_BOUND)
        assert code == 0, f"exit {code} after {time.monotonic() - began:.1f} s:\n{_log_after(server, mark)}"

        for name in ("chat", "completions"):
            _, exc = streams[name].outcome()
            assert type(exc) is openai.APIError, (name, exc)       # raised for an SSE `error` object
            assert exc.body["type"] == "server_error" and "shutting down" in exc.message, exc.body
        _, exc = streams["messages"].outcome()
        assert isinstance(exc, anthropic.APIStatusError), exc      # raised for `event: error`
        assert exc.body["type"] == "error" and exc.body["error"]["type"] == "overloaded_error", exc.body
        assert "shutting down" in exc.body["error"]["message"]
        events, exc = streams["responses"].outcome()
        assert exc is None, exc
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert [e.type for e in events[-2:]] == ["error", "response.failed"]
        assert events[-2].code == "server_error" and "shutting down" in events[-2].message
        assert events[-1].response.status == "failed" and events[-1].response.error.code == "server_error"

        _, exc = buffered["chat"].outcome()
        assert isinstance(exc, openai.APIStatusError) and exc.status_code == 503, exc
        assert exc.body["type"] == "server_error" and "shutting down" in exc.body["message"]
        _, exc = buffered["messages"].outcome()
        assert isinstance(exc, anthropic.APIStatusError) and exc.status_code == 503, exc
        assert exc.body["type"] == "error" and exc.body["error"]["type"] == "overloaded_error"

        _, exc = shared_sse.outcome()
        assert exc is None, f"the shared SSE stream did not end cleanly: {exc!r}"
        assert "Traceback" not in _log_after(server, mark)
    finally:
        server.stop()


def test_sigterm_lets_running_requests_finish_within_the_grace():
    server = ServerProcess(*ARGS, "--shutdown-grace", "120").start()
    try:
        oc = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="k", max_retries=0, timeout=120)

        def chat(started):
            finish = None
            for chunk in oc.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                                    stream=True, temperature=0, max_tokens=80):
                if chunk.choices and chunk.choices[0].delta.content:
                    started.set()
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
            return finish

        stream = Worker(chat)
        stream.start()
        assert stream.started.wait(180)
        server.proc.send_signal(signal.SIGTERM)

        def refused() -> bool:   # the listener closes: new connections are not served
            try:
                return httpx.get(f"{server.base_url}/health", timeout=5).status_code == 503
            except httpx.TransportError:
                return True
        _wait(refused, "the listener to stop serving", timeout=30)

        finish, exc = stream.outcome(timeout=180)
        assert exc is None and finish == "length", (finish, exc)   # finished, not cut by the shutdown
        ended = time.monotonic()
        code = server.wait_exit(EXIT_BOUND)
        assert code == 0, f"exit {code} {time.monotonic() - ended:.1f} s after the last request ended"
        assert "Traceback" not in "\n".join(server.stderr_lines)
    finally:
        server.stop()


def _nats_pid(server: ServerProcess) -> int:
    pids = [int(p.stem.rsplit("_", 1)[1]) for p in (server.var / "nats" / "ports").glob("*.ports")]
    assert len(pids) == 1
    return pids[0]


def _gone(pid: int) -> bool:
    """Dead, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _busy_shared(server: ServerProcess) -> tuple[SharedClient, Worker]:
    """A running shared input and an open conversation SSE stream."""
    alice, con, token = _shared(server)
    status, receipt = alice.post(f"/conversations/{con}/inputs", text=PROMPT, model=MODEL,
                                 max_output_tokens=LONG, temperature=0)
    assert status == 202, receipt
    _wait(lambda: alice.get(f"/operations/{receipt['operation']}")[1]["execution"] == "running",
          "the shared input to run")
    sse = Worker(_shared_events(server.base_url, con, token))
    sse.start()
    assert sse.started.wait(60) and sse.error is None
    return alice, sse


def _assert_quiet_exit(server: ServerProcess, mark: int, pgid: int) -> None:
    began = time.monotonic()
    code = server.wait_exit(EXIT_BOUND)
    if code is None:
        os.killpg(pgid, signal.SIGKILL)
    log = _log_after(server, mark)
    assert code == 0, f"exit {code} after {time.monotonic() - began:.1f} s (bound {EXIT_BOUND} s):\n{log[-4000:]}"
    assert "Traceback" not in log, log[-4000:]
    reconnects = [line for line in log.splitlines() if RECONNECT_LINE.search(line)]
    assert len(reconnects) <= 3, "\n".join(reconnects[:20])


def _assert_stream_ended(sse: Worker) -> None:
    """The open shared SSE stream ended with the server: cleanly, or cut with the connection."""
    _, exc = sse.outcome()
    assert exc is None or isinstance(exc, httpx.TransportError), repr(exc)


def test_sigterm_to_the_whole_process_group_exits_within_the_bound(tmp_path):
    server = ServerProcess(*ARGS, var=tmp_path / "var", new_session=True).start()
    pgid = os.getpgid(server.proc.pid)
    try:
        nats_pid = _nats_pid(server)
        _, sse = _busy_shared(server)
        mark = len(server.stderr_lines)
        os.killpg(pgid, signal.SIGTERM)     # nats-server gets it too, and goes first
        _assert_quiet_exit(server, mark, pgid)
        assert _gone(nats_pid)
        _assert_stream_ended(sse)
    finally:
        server.stop()


def test_sigterm_after_nats_server_was_killed_exits_within_the_bound(tmp_path):
    server = ServerProcess(*ARGS, var=tmp_path / "var", new_session=True).start()
    pgid = os.getpgid(server.proc.pid)
    try:
        nats_pid = _nats_pid(server)
        alice, sse = _busy_shared(server)
        mark = len(server.stderr_lines)
        os.kill(nats_pid, signal.SIGKILL)
        _wait(lambda: _gone(nats_pid), "nats-server to die", timeout=30)
        status, body = alice.post("/spaces")   # answered once the journal is found unreachable
        assert status in (429, 503), (status, body)
        server.proc.send_signal(signal.SIGTERM)
        _assert_quiet_exit(server, mark, pgid)
        _assert_stream_ended(sse)
    finally:
        server.stop()
