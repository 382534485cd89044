"""--default-temperature / --default-top-p (ops/model_args.py): checked, carried into the service's
sampling defaults, and through `aotx serve` to what a request that names none gets."""
from __future__ import annotations

import argparse

import httpx
import pytest

from aotx.sampling_defaults import SamplingDefaults, defaults_for
from ops.model_args import add_model_arguments, check_model_arguments, service_config
from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess

MODEL = "smollm2-135m-instruct"


def parse(*argv):
    p = argparse.ArgumentParser()
    add_model_arguments(p)
    return p.parse_args(list(argv))


def test_flags_default_to_the_models_own_and_override_it():
    args = parse()
    assert check_model_arguments(args) is None
    cfg = service_config(args)
    assert defaults_for(MODEL, cfg.default_temperature, cfg.default_top_p) == SamplingDefaults(0.2, 0.9)
    cfg = service_config(parse("--default-temperature", "0", "--default-top-p", "1"))
    assert defaults_for(MODEL, cfg.default_temperature, cfg.default_top_p) == SamplingDefaults(0.0, 1.0)
    assert defaults_for("another-model") == SamplingDefaults(1.0, 1.0)


@pytest.mark.parametrize("argv,word", [(("--default-temperature", "2.5"), "--default-temperature"),
                                       (("--default-temperature", "-0.1"), "--default-temperature"),
                                       (("--default-top-p", "0"), "--default-top-p"),
                                       (("--default-top-p", "1.5"), "--default-top-p")])
def test_out_of_range_flags_are_refused(argv, word):
    assert word in check_model_arguments(parse(*argv))


def test_serve_with_default_temperature_zero_answers_greedy_to_a_request_that_names_none():
    proc = ServerProcess(*SERVER_ARGS, "--default-temperature", "0").start()
    try:
        url = proc.base_url
        assert httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["sampling_defaults"] == \
            {"temperature": 0.0, "top_p": 0.9}
        body = {"model": MODEL, "max_tokens": 12, "messages": [{"role": "user", "content": "Name a colour."}]}
        greedy = httpx.post(f"{url}/v1/chat/completions", json={**body, "temperature": 0}, timeout=120).json()
        for _ in range(2):
            got = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).json()
            assert got["choices"][0]["message"]["content"] == greedy["choices"][0]["message"]["content"]
    finally:
        proc.stop()
