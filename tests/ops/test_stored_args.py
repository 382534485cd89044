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


FLAGS = {"--response-ttl": "response_ttl", "--stored-max-responses": "responses",
         "--stored-max-conversations": "conversations", "--stored-max-keys": "keys",
         "--stored-max-items": "items_per_conversation", "--stored-max-bytes": "bytes",
         "--stored-max-command-bytes": "command_bytes", "--idempotency-ttl": "idempotency_ttl"}


def test_every_stored_limit_has_a_flag_on_serve_and_boot():
    from dataclasses import fields
    assert sorted(FLAGS.values()) == sorted(f.name for f in fields(StoredLimits))
    assert _limits() == StoredLimits()
    given = ["--response-ttl", "0", "--stored-max-responses", "3", "--stored-max-conversations", "4",
             "--stored-max-keys", "5", "--stored-max-items", "6", "--stored-max-bytes", "512MiB",
             "--stored-max-command-bytes", "64KiB", "--idempotency-ttl", "2m"]
    want = StoredLimits(response_ttl=0, responses=3, conversations=4, keys=5, items_per_conversation=6,
                        bytes=512 << 20, command_bytes=64 << 10, idempotency_ttl=120)
    assert _limits(*given) == want
    boot = build_parser().parse_args(["boot", "--runtime", "r", "--nats", "n", "--service-grants", "g", *given])
    assert runtime_options(boot)["stored_limits"] == want
    assert _limits("--response-ttl", "1h").response_ttl == 3600


@pytest.mark.parametrize("text, size", [("4096", 4096), ("1GiB", 1 << 30), ("512mib", 512 << 20), ("1KiB", 1024),
                                        ("2GB", 2 * 10 ** 9), ("10 MB", 10 ** 7), ("7B", 7), ("1TiB", 1 << 40)])
def test_a_size_takes_a_binary_or_decimal_unit(text, size):
    assert _limits("--stored-max-bytes", text).bytes == size


@pytest.mark.parametrize("flag, bad", [("--stored-max-bytes", "0"), ("--stored-max-bytes", "1.5GiB"),
                                       ("--stored-max-bytes", "1XB"), ("--stored-max-bytes", "-1"),
                                       ("--stored-max-command-bytes", "GiB"), ("--stored-max-responses", "0"),
                                       ("--stored-max-keys", "-3"), ("--stored-max-items", "ten"),
                                       ("--stored-max-conversations", "1e3"), ("--response-ttl", "-1"),
                                       ("--response-ttl", "1w"), ("--stored-max-responses", str(1 << 49))])
def test_a_bad_limit_is_one_argparse_line_and_exit_2(flag, bad, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", flag, bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert flag in last and "error:" in last
