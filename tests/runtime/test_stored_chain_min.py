"""AOTX_STORED_CHAIN_MIN: from how many ticks a stored round's flight goes as one atomic batch instead of
a chain of acks (aotx.runtime.stored_round.CHAIN_MIN, default 4) — for the H200 A/B of the 8-stream round."""
from __future__ import annotations

import logging

import pytest

from aotx.runtime.stored_round import DEFAULT_CHAIN_MIN, chain_min_from


@pytest.mark.parametrize("raw, want", [(None, DEFAULT_CHAIN_MIN), ("", DEFAULT_CHAIN_MIN), ("2", 2), (" 7 ", 7),
                                       ("1", 1), ("none", None), ("off", None)])
def test_the_setting_reads_a_tick_count_or_none(raw, want):
    assert chain_min_from(raw) == want


@pytest.mark.parametrize("raw", ["0", "-3", "two", "2.5"])
def test_a_bad_value_keeps_the_default_and_says_so(raw, caplog):
    with caplog.at_level(logging.WARNING, logger="aotx.runtime"):
        assert chain_min_from(raw) == DEFAULT_CHAIN_MIN
    assert "AOTX_STORED_CHAIN_MIN" in caplog.text and repr(raw) in caplog.text
