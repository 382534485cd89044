"""The process-side parts of `aotx serve --http-workers N`: the flag, the SO_REUSEPORT sockets, the wire
codec of deltas and sampling params, and the bench's CPU accounting and report column."""
from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import sys

import msgpack
import pytest

from aotx.engine.types import Delta, SamplingParams, TokenLogprob, TopLogprob
from aotx.engine_wire import (
    delta_from_wire,
    delta_to_wire,
    params_from_wire,
    params_to_wire,
    split_to_fit,
)
from ops.gpu import serving_report
from ops.gpu.serve_load import cpu_per_token, server_cpu
from ops.http_workers import HttpWorkers, auto_workers, bind_reuseport
from ops.worker_restarts import RestartPolicy
from ops.serve_cmd import _workers
from tests.waiting import wait_until_async


def test_the_flag_takes_a_count_or_auto():
    assert _workers("1") == 1 and _workers("3") == 3
    assert _workers("auto") == auto_workers() == max(1, min(8, (os.cpu_count() or 1) - 2))
    for bad in ("0", "-2", "many"):
        with pytest.raises(argparse.ArgumentTypeError):
            _workers(bad)


def test_reuseport_sockets_share_one_port_and_each_accepts():
    socks = bind_reuseport("127.0.0.1", 0, 3)
    try:
        ports = {s.getsockname()[1] for s in socks}
        assert len(ports) == 1
        for _ in range(6):
            with socket.create_connection(("127.0.0.1", ports.pop() if ports else socks[0].getsockname()[1])):
                pass
        taken = socket.socket()
        with pytest.raises(OSError):   # a plain socket cannot take the port from the group
            taken.bind(("127.0.0.1", socks[0].getsockname()[1]))
        taken.close()
    finally:
        for s in socks:
            s.close()


def test_a_socket_bound_for_a_restarted_worker_takes_no_connection_until_it_listens():
    """The port keeps answering through the live workers while a dead one is started again: the new
    worker's socket joins the port unlistened (the HTTP server listens once the worker serves)."""
    (live,) = bind_reuseport("127.0.0.1", 0, 1)
    port = live.getsockname()[1]
    (fresh,) = bind_reuseport("127.0.0.1", port, 1, listen=False)
    try:
        live.settimeout(10)
        for _ in range(8):   # every connection reaches the listening socket (none waits in the new one)
            with socket.create_connection(("127.0.0.1", port)):
                live.accept()[0].close()
        fresh.listen(8)
        fresh.settimeout(10)
        reached = set()
        for _ in range(64):   # listening, it takes its share
            with socket.create_connection(("127.0.0.1", port)):
                for s in (live, fresh):
                    s.setblocking(False)
                    try:
                        s.accept()[0].close()
                        reached.add(s.fileno())
                    except BlockingIOError:
                        pass
            if len(reached) == 2:
                break
        assert reached == {live.fileno(), fresh.fileno()}
    finally:
        live.close()
        fresh.close()


def test_deltas_and_params_cross_the_wire_unchanged():
    lp = TokenLogprob(5, "a", b"a", -0.5, (TopLogprob(5, "a", b"a", -0.5), TopLogprob(6, "\ufffd", b"\xe2", -1.0)))
    deltas = [Delta("hé", (1, 2), (lp,), None, None, 3, 2, None, (TokenLogprob(1, "x", b"x", None),)),
              Delta("", finish_reason="stop", stop_sequence="\n\n", prompt_tokens=3, completion_tokens=4),
              Delta("", finish_reason="error", error="engine unavailable: gone")]
    for d in deltas:
        assert delta_from_wire(msgpack.unpackb(msgpack.packb(delta_to_wire(d)), raw=False)) == d
    p = SamplingParams(max_tokens=7, temperature=0.2, top_p=0.9, top_k=4, seed=2**70, stop=("a", "b"),
                       stop_token_ids=(2,), logprobs=3, prompt_logprobs=0)
    for seed in (2**70 + 5, -1, 7, None):   # any integer: the engine reads it mod 2**64, so the wire does
        q = dataclasses.replace(p, seed=seed)
        got = params_from_wire(msgpack.unpackb(msgpack.packb(params_to_wire(q)), raw=False))
        assert got == dataclasses.replace(q, seed=None if seed is None else seed % 2**64)


def test_a_step_crosses_as_one_message_with_plain_tokens_in_short_form():
    """One engine step for one worker: every delta back, in order, whatever it carries; a plain token
    (text, ids and counts only: the common case) is a flat 5-item array, not a 9-field delta."""
    from aotx.engine_wire import step_from_wire, step_to_wire

    lp = TokenLogprob(5, "a", b"a", -0.5, (TopLogprob(5, "a", b"a", -0.5),))
    step = [(1, Delta(" tok", (42,), (), None, None, 3, 1)), (2, Delta("hé", (1, 2), (lp,), None, None, 3, 2)),
            (3, Delta("", (7,), (), "stop", "\n\n", 3, 4)), (4, Delta("", finish_reason="error", error="gone")),
            (5, Delta("x", (9,), (), None, None, 3, 5, None, (TokenLogprob(1, "x", b"x", None),)))]
    data = msgpack.packb(step_to_wire(step), use_bin_type=True)
    assert step_from_wire(msgpack.unpackb(data, raw=False, use_list=False)) == step
    assert step_from_wire(msgpack.unpackb(data, raw=False)) == step
    assert msgpack.unpackb(data, raw=False)[0] == [1, " tok", [42], 3, 1]
    plain = msgpack.packb(step_to_wire([(i, Delta(" tok", (1000 + i,), (), None, None, 30, 100 + i))
                                        for i in range(64)]), use_bin_type=True)
    assert len(plain) <= 64 * 14   # 19 bytes a token as 9-field deltas


def test_a_step_too_big_for_one_message_is_split_in_order():
    items = [[i, ["x" * 100]] for i in range(50)]
    parts = split_to_fit(items, msgpack.packb, 1000)
    assert len(parts) > 1 and all(len(p) <= 1000 for p in parts)
    assert [i for p in parts for i in msgpack.unpackb(p)] == items


def test_cpu_accounting_and_the_report_column():
    cpu = server_cpu(os.getpid())
    assert set(cpu) == {"main", "workers", "nats"} and cpu["main"] > 0
    per = cpu_per_token({"main": 1.0, "workers": 0.0, "nats": 0.0}, {"main": 1.5, "workers": 1.0, "nats": 0.1}, 10_000)
    assert per == pytest.approx({"cpu_us_per_token_main": 50, "cpu_us_per_token_workers": 100,
                                 "cpu_us_per_token_nats": 10, "cpu_us_per_token_all": 160})
    row = {"tok_s": 10.0, "ttft_p50_ms": 1.0, "ttft_p99_ms": 2.0, "itl_p50_ms": 1.0, "itl_p99_ms": 2.0,
           "device_busy_share": 0.5, "mean_decode_batch": 2.0, "max_decode_batch": 2, **per}
    doc = {"device": "CPU", "backend": "numpy", "date": "d", "commit": "c", "command": "x", "max_tokens": 3,
           "temperature": 0.7, "rows": {"2": {"kernels_tok_s": 20.0, "engine": {},
                                               "http": {"behind, 2 HTTP workers": row}}}}
    assert "| 2 | http | behind, 2 HTTP workers | 10 | 0.50 |" in serving_report.markdown(doc)
    assert "| 50 / 100 / 10 |" in serving_report.markdown(doc)


def test_a_dead_worker_is_restarted_with_backoff_until_a_crash_loop():
    policy = RestartPolicy(first=0.5, ceiling=4.0, loop_exits=5, window=30.0)
    assert [policy.exited(t) for t in (0.0, 1.0, 2.0, 3.0)] == [0.5, 1.0, 2.0, 4.0]
    assert policy.exited(4.0) is None   # the 5th exit within 30 s: no more restarts
    calm = RestartPolicy(first=0.5, ceiling=4.0, loop_exits=5, window=30.0)
    assert [calm.exited(t) for t in (0.0, 40.0, 80.0, 120.0, 160.0, 200.0)] == [0.5] * 6   # far apart: no loop
    ceiling = RestartPolicy(first=1.0, ceiling=3.0, loop_exits=10, window=30.0)
    assert [ceiling.exited(t) for t in range(4)] == [1.0, 2.0, 3.0, 3.0]


def _stand_in(body: str) -> tuple[str, ...]:
    """A worker stand-in that says `ready` like ops.http_worker, then runs `body`."""
    return (sys.executable, "-c", f"print('ready', flush=True)\n{body}")


def _supervised(command: tuple[str, ...], policy=None) -> HttpWorkers:
    socks = bind_reuseport("127.0.0.1", 0, 1)
    spec = {"host": "127.0.0.1", "port": socks[0].getsockname()[1]}
    return HttpWorkers(socks, spec, command=command,
                       policy=policy or (lambda: RestartPolicy(first=0.01, ceiling=0.02, loop_exits=3, window=600)))


async def test_a_worker_that_keeps_dying_is_restarted_until_a_crash_loop(caplog):
    workers = _supervised(_stand_in("raise SystemExit(3)"))
    await workers.start()
    try:
        await wait_until_async(lambda: workers.given_up, "the crash loop to stop the restarts")
        assert workers.given_up == [0] and workers.exits == 3 and workers.restarts == 2
        assert "exited with 3" in caplog.text and "a crash loop, NOT started again" in caplog.text
        assert workers.snapshot()["pids"] == []
    finally:
        await workers.stop(10)


async def test_a_killed_worker_is_started_again_and_stop_starts_nothing():
    workers = _supervised(_stand_in("import signal\nsignal.pause()"))   # serves until a signal ends it
    await workers.start()
    try:
        (first,) = workers.pids
        os.kill(first, signal.SIGKILL)
        doc = await wait_until_async(workers.snapshot, "the killed worker to be started again",
                                     done=lambda d: d["restarts"] == 1 and len(d["pids"]) == 1)
        assert doc["pids"] != [first] and doc["exits"] == 1
    finally:
        await workers.stop(10)
    assert workers.restarts == 1 and workers.exits == 1 and workers.snapshot()["pids"] == []
    assert all(p.returncode is not None for p in workers.procs)
