"""`--idempotency-ttl` of `aotx serve` / `aotx boot`: parsed as a duration, carried to the runtime's StoredLimits."""
from __future__ import annotations

import pytest

from aotx.stored import StoredLimits
from ops.cli import build_parser
from ops.model_args import runtime_options


def _limits(*flags: str) -> StoredLimits:
    return runtime_options(build_parser().parse_args(["serve", *flags]))["stored_limits"]


def test_the_default_is_24_hours_and_a_duration_takes_a_unit():
    assert _limits().idempotency_ttl == 86400 == StoredLimits().idempotency_ttl
    for text, seconds in (("3600", 3600), ("90s", 90), ("30m", 1800), ("2h", 7200), ("7d", 604800)):
        assert _limits("--idempotency-ttl", text).idempotency_ttl == seconds
    boot = build_parser().parse_args(["boot", "--runtime", "r", "--nats", "n", "--service-grants", "g",
                                      "--idempotency-ttl", "5m"])
    assert runtime_options(boot)["stored_limits"].idempotency_ttl == 300


@pytest.mark.parametrize("bad", ["0", "-5", "1w", "h", "", "1.5h"])
def test_a_bad_duration_is_refused_by_the_parser(bad, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--idempotency-ttl", bad])
    assert "--idempotency-ttl" in capsys.readouterr().err
