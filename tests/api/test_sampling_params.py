"""Sampling parameters on the four surfaces (api/sampling_params.py, aotx/sampling_defaults.py):
penalties, logit_bias, top_k and min_p reach the engine on Chat and Completions; Responses and
Messages refuse what their wire format does not define; a request that names no temperature /
top_p gets the model's defaults (SmolLM2: 0.2 / 0.9), an explicit value always wins."""
from __future__ import annotations

import pytest

from tests.api.fake_service import FakeService, make_app
from tests.api.test_requests import SURFACES, assert_error, post

MODEL = FakeService.model_id
OPENAI = ("chat", "completions")


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def client(service):
    return make_app(service).test_client()


@pytest.mark.parametrize("surface", OPENAI)
async def test_penalties_bias_top_k_min_p_reach_the_engine(client, service, surface):
    path, body, _ = SURFACES[surface]
    resp, out = await post(client, path, {**body, "presence_penalty": 0.5, "frequency_penalty": -1.25,
                                          "logit_bias": {"42": -100, "7": 3.5}, "top_k": 20, "min_p": 0.05})
    assert resp.status_code == 200, out
    p = service.submitted[-1][1]
    assert (p.presence_penalty, p.frequency_penalty, p.top_k, p.min_p) == (0.5, -1.25, 20, 0.05)
    assert dict(p.logit_bias) == {42: -100.0, 7: 3.5}


@pytest.mark.parametrize("surface", OPENAI)
@pytest.mark.parametrize("extra,param", [
    ({"logit_bias": {"abc": 1}}, "logit_bias"), ({"logit_bias": {"49152": 1}}, "logit_bias"),
    ({"logit_bias": {"-1": 1}}, "logit_bias"), ({"logit_bias": {"01": 1}}, "logit_bias"),
    ({"logit_bias": {"5": 100.5}}, "logit_bias"), ({"logit_bias": {"5": "1"}}, "logit_bias"),
    ({"logit_bias": {"5": True}}, "logit_bias"), ({"logit_bias": [1, 2]}, "logit_bias"),
    ({"presence_penalty": 2.5}, "presence_penalty"), ({"frequency_penalty": -3}, "frequency_penalty"),
    ({"frequency_penalty": "1"}, "frequency_penalty"), ({"top_k": -2}, "top_k"), ({"top_k": 1.5}, "top_k"),
    ({"min_p": 1.5}, "min_p"), ({"min_p": -0.1}, "min_p"), ({"ignore_eos": 1}, "ignore_eos"),
    ({"ignore_eos": "true"}, "ignore_eos"),
])
async def test_bad_sampling_values_are_a_400_naming_the_param(client, service, surface, extra, param):
    path, body, _ = SURFACES[surface]
    resp, out = await post(client, path, {**body, **extra})
    assert_error(resp, out, 400, param=param)
    assert not service.submitted


@pytest.mark.parametrize("surface", OPENAI)
async def test_ignore_eos_reaches_the_engine_as_vllm_takes_it(client, service, surface):
    path, body, _ = SURFACES[surface]
    resp, out = await post(client, path, {**body, "ignore_eos": True})
    assert resp.status_code == 200, out
    assert service.submitted[-1][1].ignore_eos is True
    await post(client, path, {**body, "ignore_eos": None})
    assert service.submitted[-1][1].ignore_eos is False


async def test_top_k_minus_one_is_off_as_vllm_spells_it(client, service):
    path, body, _ = SURFACES["chat"]
    resp, _ = await post(client, path, {**body, "top_k": -1})
    assert resp.status_code == 200 and service.submitted[-1][1].top_k == 0


@pytest.mark.parametrize("surface,key", [
    ("responses", "frequency_penalty"), ("responses", "presence_penalty"), ("responses", "logit_bias"),
    ("responses", "top_k"), ("responses", "min_p"), ("responses", "ignore_eos"),
    ("messages", "frequency_penalty"), ("messages", "presence_penalty"), ("messages", "logit_bias"),
    ("messages", "min_p"), ("messages", "ignore_eos"),
])
async def test_responses_and_messages_refuse_sampling_params_they_do_not_define(client, service, surface, key):
    path, body, field = SURFACES[surface]
    value = {"1": 2} if key == "logit_bias" else True if key == "ignore_eos" else 0.5
    resp, out = await post(client, path, {**body, field: 4, key: value})
    message = assert_error(resp, out, 400, anthropic=surface == "messages", param=None if surface == "messages" else key)
    assert key in message
    assert not service.submitted


async def test_messages_takes_top_k(client, service):
    path, body, field = SURFACES["messages"]
    resp, _ = await post(client, path, {**body, field: 4, "top_k": 5})
    assert resp.status_code == 200 and service.submitted[-1][1].top_k == 5


@pytest.mark.parametrize("surface", ["chat", "completions", "responses", "messages"])
async def test_model_defaults_apply_where_the_request_names_none(client, service, surface):
    path, body, field = SURFACES[surface]
    for extra, expected in [({}, (0.2, 0.9)), ({"temperature": None, "top_p": None}, (0.2, 0.9)),
                            ({"temperature": 0}, (0.0, 0.9)), ({"top_p": 1.0}, (0.2, 1.0)),
                            ({"temperature": 1.0, "top_p": 0.5}, (1.0, 0.5))]:
        resp, out = await post(client, path, {**body, field: 4, **extra})
        assert resp.status_code == 200, out
        p = service.submitted[-1][1]
        assert (p.temperature, p.top_p) == pytest.approx(expected), (extra, surface)


async def test_responses_echo_the_temperature_and_top_p_used(client):
    path, body, field = SURFACES["responses"]
    resp, out = await post(client, path, {**body, field: 4})
    assert resp.status_code == 200
    assert (out["temperature"], out["top_p"]) == pytest.approx((0.2, 0.9))
