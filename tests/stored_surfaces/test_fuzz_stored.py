"""Any JSON body to the stored routes gets a native OpenAI answer, never a 5xx, and a refused one stores
nothing (hypothesis, unpinned)."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.test_fuzz_surfaces import json_values

from .conftest import call

pytestmark = pytest.mark.asyncio(loop_scope="session")
MODEL = "smollm2-135m-instruct"
ITEM = st.fixed_dictionaries({}, optional={"type": st.sampled_from(["message", "function_call",
                                                                     "function_call_output", "reasoning"]) | json_values,
                                           "role": st.sampled_from(["user", "assistant", "developer"]) | json_values,
                                           "content": st.text(max_size=8) | json_values,
                                           "id": st.just("msg_" + "a" * 24) | json_values,
                                           "call_id": st.text(max_size=4), "name": st.text(max_size=4),
                                           "arguments": st.text(max_size=4), "output": json_values})
FIELDS = {"store": st.booleans() | json_values, "previous_response_id": json_values,
          "conversation": json_values | st.builds(lambda v: {"id": v}, json_values),
          "truncation": st.sampled_from(["auto", "disabled"]) | json_values,
          "metadata": st.dictionaries(st.text(max_size=70), st.text(max_size=600) | json_values, max_size=20)
          | json_values, "input": st.text(max_size=8) | st.lists(ITEM, max_size=4) | json_values,
          "items": st.lists(ITEM, max_size=22) | json_values}
bodies = st.fixed_dictionaries({"model": st.just(MODEL)}, optional=FIELDS)
PATHS = ["/v1/responses", "/v1/conversations", "/v1/conversations/{conv}", "/v1/conversations/{conv}/items"]


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), body=bodies)
async def test_any_body_to_a_stored_route_gets_a_native_answer_and_a_refusal_stores_nothing(
        client, runtime, path, body):
    conv = runtime_conversation.get(id(runtime))
    if conv is None:
        conv = runtime_conversation[id(runtime)] = (await call(client, "POST", "/v1/conversations", {}))[1]["id"]
    before = runtime.projector.stored.totals
    status, payload = await call(client, "POST", path.format(conv=conv), body)
    assert status < 500, (path, body, payload)
    if status >= 400:
        assert set(payload["error"]) == {"message", "type", "param", "code"}, payload
        assert runtime.projector.stored.totals == before, (path, body, payload)
    json.dumps(payload, allow_nan=False)


runtime_conversation: dict[int, str] = {}
