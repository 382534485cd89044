"""Which requests an HTTP worker forwards to the main process (api.worker_proxy.forwarded): the routes whose
state has one writer; a Responses request that stores nothing stays in the worker."""
from __future__ import annotations

import json

import pytest

from api.worker_proxy import forwarded

NO = {}


@pytest.mark.parametrize(("method", "path", "headers", "body", "to_main"), [
    ("POST", "/v1/chat/completions", NO, {}, False),
    ("POST", "/v1/completions", NO, {}, False),
    ("POST", "/v1/messages", NO, {}, False),
    ("GET", "/v1/models", NO, None, False),
    ("GET", "/health", NO, None, False),
    ("GET", "/aotx/v1/shared/participant", NO, None, False),
    ("POST", "/v1/chat/completions", {"Idempotency-Key": "k"}, {}, True),
    ("GET", "/v1/stats", NO, None, True),
    ("GET", "/metrics", NO, None, True),
    ("POST", "/v1/responses", NO, {"input": "hi"}, True),                          # stored by default
    ("POST", "/v1/responses", NO, {"input": "hi", "store": True}, True),
    ("POST", "/v1/responses", NO, {"input": "hi", "store": False}, False),
    ("POST", "/v1/responses", NO, {"input": "hi", "store": False, "background": True}, True),
    ("POST", "/v1/responses", NO, {"input": "hi", "store": False, "previous_response_id": "resp_1"}, True),
    ("POST", "/v1/responses", NO, {"input": "hi", "store": False, "conversation": "conv_1"}, True),
    ("POST", "/v1/responses", {"Idempotency-Key": "k"}, {"input": "hi", "store": False}, True),
    ("POST", "/v1/responses", NO, b"{not json", True),
    ("POST", "/v1/responses", NO, [1], True),
    ("GET", "/v1/responses/resp_1", NO, None, True),
    ("POST", "/v1/responses/resp_1/cancel", NO, {}, True),
    ("GET", "/v1/conversations/conv_1/items", NO, None, True),
    ("POST", "/v1/conversations", NO, {}, True),
])
def test_what_goes_to_the_main_process(method, path, headers, body, to_main):
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    assert forwarded(method, path, headers, raw) is to_main
