"""The stored surfaces' end-to-end modules (stored Responses and Conversations, Idempotency-Key) run
again, unchanged, against `aotx serve --http-workers 2`: every server this module starts gets
the flag, so the one-writer guarantees hold when the requests come through the workers."""
from __future__ import annotations

import os

import pytest

from tests.conftest import SERVER_ARGS
from tests.e2e.test_idempotency_keys import *
from tests.e2e.test_stored_responses import *
from tests.server_process import EXTRA_ARGS_ENV, ServerProcess

FLAGS = "--http-workers 2"

# What the worker hop could change is the routing of stored and keyed requests, not what a restart
# does to the log (the journal is the main process's, as without workers): the restart case runs
# once, in its own module, not again here; background runs take the same forwarding to the main
# process as every /v1/responses* route (tests/api/test_worker_proxy_routes.py), so their module
# is not repeated either (test time: `make test` must stay under 10 minutes on the 2-core CI box).
del test_stored_state_survives_kill_9


@pytest.fixture(scope="module", autouse=True)
def _with_workers():
    before = os.environ.get(EXTRA_ARGS_ENV)
    os.environ[EXTRA_ARGS_ENV] = FLAGS
    yield
    if before is None:
        os.environ.pop(EXTRA_ARGS_ENV, None)
    else:
        os.environ[EXTRA_ARGS_ENV] = before


@pytest.fixture(scope="module")
def server(_with_workers):
    proc = ServerProcess(*SERVER_ARGS).start()
    assert "--http-workers" in proc.cmd
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def served(server):
    return server.base_url


@pytest.fixture(scope="module")
def base_url(server) -> str:
    return server.base_url


@pytest.fixture(scope="module")
def openai_client(base_url):
    import openai
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


@pytest.fixture
def async_openai_client(base_url):
    import openai
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="any-key", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def anthropic_client(base_url):
    import anthropic
    return anthropic.Anthropic(base_url=base_url, api_key="any-key", max_retries=0, timeout=120)
