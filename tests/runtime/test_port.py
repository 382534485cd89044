"""The gateway's runtime port (aotx.runtime.port): the in-process, granted and split runtimes all
declare it with signatures the gateway can call alike; a body is parsed once, at the edge."""

from __future__ import annotations

import inspect

import pytest

from aotx.runtime import GrantedRuntime, Outcome, RemoteRuntime, RuntimePort, SharedRuntime, parse_submission
from aotx.state import MutationKind, SubmitInput

from .test_group_commit import body

METHODS = ("start", "stop", "submit", "query", "describe")


@pytest.mark.parametrize("cls", [SharedRuntime, GrantedRuntime, RemoteRuntime])
def test_each_runtime_declares_the_port_with_callable_signatures(cls):
    assert RuntimePort in cls.__mro__   # declared, not only shaped alike
    assert isinstance(inspect.getattr_static(cls, "started"), property)
    assert not hasattr(cls, "wait_change")   # readers wait on the broker, never on one global change
    assert "broker" in RuntimePort.__annotations__
    for name in METHODS:
        want, got = inspect.signature(getattr(RuntimePort, name)), inspect.signature(getattr(cls, name))
        assert inspect.iscoroutinefunction(getattr(cls, name)), name
        required = [p.name for p in got.parameters.values()
                    if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        assert required == [p.name for p in want.parameters.values()
                            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)], (cls.__name__, name)


def test_a_body_is_parsed_at_the_edge_into_the_mutation_or_its_400():
    con = "con-" + "ab" * 16 + "-" + "cd" * 16
    parsed = parse_submission(MutationKind.INPUT, body("alice", 1, 1, text="hi", model="m"), con)
    assert isinstance(parsed, SubmitInput) and parsed.text == "hi"
    refused = parse_submission(MutationKind.INPUT, b'{"schema": 1}', con)
    assert isinstance(refused, Outcome) and refused.status == 400
    assert refused.body["error"]["type"] == "invalid_request"


def test_each_runtime_has_a_broker_for_its_stream_readers():
    from aotx.runtime import Broker
    from eventlog.memory import MemoryRecorder

    shared = SharedRuntime(recorder=MemoryRecorder(), progress=False)
    assert isinstance(shared.broker, Broker)
    assert GrantedRuntime.broker.fget(type("G", (), {"runtime": shared})()) is shared.broker
    assert isinstance(RemoteRuntime("nats://127.0.0.1:1", "n", "ab" * 32).broker, Broker)
