"""An opt-in pytest plugin that names the test which leaves a nats-py client open on a closed event loop
(what later shows up as a `PytestUnraisableExceptionWarning` about `Subscription._wait_for_msgs` or
`Client._flusher`, attached to whichever test runs when the garbage collector finds it).

    OPENBLAS_NUM_THREADS=1 python -m pytest -p tests.nats_leaks [-n 2 --dist loadscope] tests/...

After every test, each client connected so far whose flusher task's loop is closed while the client is
not closed is written to $AOTX_NATS_LEAKS (default ./nats-leaks.txt) with the test that connected it and
the innermost frames of that connect. Nothing is written when no test leaks.
"""
from __future__ import annotations

import os
import traceback
import weakref

import pytest
from nats.aio.client import Client

_made: list[tuple[weakref.ref, str, str]] = []   # (the client, the test that connected it, where)
_current = [""]
_connect = Client.connect


async def _recording_connect(self, *args, **kwargs):
    where = "".join(traceback.format_stack()[-12:-1])
    _made.append((weakref.ref(self), _current[0], where))
    return await _connect(self, *args, **kwargs)


Client.connect = _recording_connect


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid
    yield
    for entry in list(_made):
        ref, made_in, where = entry
        client = ref()
        if client is None:
            _made.remove(entry)
            continue
        task = getattr(client, "_flusher_task", None)
        if task is not None and task.get_loop().is_closed() and not client.is_closed:
            with open(os.environ.get("AOTX_NATS_LEAKS", "nats-leaks.txt"), "a") as out:
                out.write(f"nats client left open: connected in {made_in}, seen after {item.nodeid}\n{where}\n")
            _made.remove(entry)
