"""--switch-interval / $AOTX_SWITCH_INTERVAL_MS (ops/model_args.py): the process's GIL switch interval,
checked, and set before the model loads (the engine thread and the event loop share the GIL)."""
from __future__ import annotations

import argparse
import sys

import pytest

from ops.model_args import DEFAULT_SWITCH_MS, add_model_arguments, apply_switch_interval, check_model_arguments


def parse(*argv):
    p = argparse.ArgumentParser()
    add_model_arguments(p)
    return p.parse_args(list(argv))


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_default_is_cpythons_and_the_flag_or_the_variable_sets_it(monkeypatch, interval):
    monkeypatch.delenv("AOTX_SWITCH_INTERVAL_MS", raising=False)
    args = parse()
    assert args.switch_interval == DEFAULT_SWITCH_MS == 5.0 and check_model_arguments(args) is None
    apply_switch_interval(parse("--switch-interval", "0.5"))
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    monkeypatch.setenv("AOTX_SWITCH_INTERVAL_MS", "1")
    args = parse()
    assert args.switch_interval == 1.0
    apply_switch_interval(args)
    assert sys.getswitchinterval() == pytest.approx(0.001)
    assert parse("--switch-interval", "2").switch_interval == 2.0   # the flag wins over the variable


@pytest.mark.parametrize("value", ["0", "0.01", "101", "-1"])
def test_an_interval_out_of_range_is_refused_naming_the_flag(value):
    assert "--switch-interval" in check_model_arguments(parse("--switch-interval", value))


def test_a_variable_that_is_not_a_number_is_refused(monkeypatch):
    monkeypatch.setenv("AOTX_SWITCH_INTERVAL_MS", "fast")
    assert "AOTX_SWITCH_INTERVAL_MS" in check_model_arguments(parse())
