"""The stored-state flags of `aotx serve` and `aotx boot` (issue 11): one flag per StoredLimits field.

* `--idempotency-ttl DURATION` (default 24h): how long a finished Idempotency-Key answer is kept and
  replayed; then the key reads as absent and a request with it runs afresh.
* `--response-ttl DURATION` (default 30d; `0` = kept until deleted): how long a stored response is kept.
* `--stored-max-responses N`, `--stored-max-conversations N`, `--stored-max-keys N`: table sizes
  (over every identity); `--stored-max-items N`: items of one conversation.
* `--stored-max-bytes SIZE` (every stored JSON and event byte), `--stored-max-command-bytes SIZE` (the
  JSON of one command): a whole number of bytes, optionally with a unit: `512KiB`, `512MiB`, `1GiB`
  (binary), `1KB`, `1MB`, `1GB` (decimal), `B`.

A duration is a whole number of seconds, optionally with a unit: `90s`, `30m`, `24h`, `7d`. A bad value
is an argparse error (exit status 2, one line naming the flag).
"""
from __future__ import annotations

import argparse
import re
from dataclasses import fields

from aotx.stored import StoredLimits
from aotx.stored.limits import DAY

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": DAY}
_DURATION = re.compile(r"([0-9]{1,12})([smhd]?)")
_SIZE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
               "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_SIZE = re.compile(r"([0-9]{1,15}) ?([a-z]*)")
_MOST = 1 << 48   # StoredLimits' own bound
_DEFAULTS = StoredLimits()


def _duration(text: str, least: int) -> int:
    m = _DURATION.fullmatch(text.strip().lower())
    seconds = int(m.group(1)) * _UNITS[m.group(2)] if m else -1
    if not least <= seconds <= 1 << 40:
        what = "positive duration" if least else "duration (0 = never)"
        raise argparse.ArgumentTypeError(f"{text!r} is not a {what} (e.g. 3600, 90s, 30m, 24h, 7d)")
    return seconds


def duration(text: str) -> int:
    """Seconds of a duration flag (argparse type): `3600`, `90s`, `30m`, `24h`, `7d`."""
    return _duration(text, 1)


def duration_or_zero(text: str) -> int:
    """A duration flag where `0` means "never"."""
    return _duration(text, 0)


def count(text: str) -> int:
    """A positive whole number (argparse type)."""
    if not re.fullmatch(r"[0-9]{1,15}", text.strip()) or not 1 <= int(text) <= _MOST:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in 1..{_MOST}")
    return int(text)


def size(text: str) -> int:
    """Bytes of a size flag (argparse type): `4096`, `512KiB`, `512MiB`, `1GiB`, `1GB`."""
    m = _SIZE.fullmatch(text.strip().lower())
    unit = _SIZE_UNITS.get(m.group(2)) if m else None
    value = int(m.group(1)) * unit if m and unit else 0
    if not 1 <= value <= _MOST:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in 1..{_MOST} bytes "
                                         "(e.g. 4096, 512KiB, 512MiB, 1GiB, 1GB)")
    return value


# flag → (StoredLimits field, argparse type, metavar, help)
_FLAGS = {
    "--idempotency-ttl": ("idempotency_ttl", duration, "DURATION",
                          ("how long a finished Idempotency-Key answer is kept and replayed (default 24h; "
                           "seconds, or with a unit: 90s, 30m, 24h, 7d); then the key runs afresh")),
    "--response-ttl": ("response_ttl", duration_or_zero, "DURATION",
                       ("how long a stored response is kept after it was created (default 30d; 0 = until "
                        "deleted); then it reads as unknown (404) and its room is freed")),
    "--stored-max-responses": ("responses", count, "N", "stored responses, over every identity (default 65536)"),
    "--stored-max-conversations": ("conversations", count, "N", "stored conversations (default 16384)"),
    "--stored-max-keys": ("keys", count, "N", "Idempotency-Key records (default 65536)"),
    "--stored-max-items": ("items_per_conversation", count, "N", "items of one conversation (default 10000)"),
    "--stored-max-bytes": ("bytes", size, "SIZE",
                           "every stored JSON and event byte (default 1GiB; e.g. 512MiB, 1GiB, 1GB)"),
    "--stored-max-command-bytes": ("command_bytes", size, "SIZE",
                                   "the JSON of one stored command (default 1MiB; a larger one is a 413)"),
}


def add_stored_arguments(p: argparse.ArgumentParser) -> None:
    for flag, (field, kind, metavar, text) in _FLAGS.items():
        p.add_argument(flag, dest=f"stored_{field}", type=kind, default=getattr(_DEFAULTS, field),
                       metavar=metavar, help=text)


def stored_limits(args: argparse.Namespace) -> StoredLimits:
    return StoredLimits(**{f.name: int(getattr(args, f"stored_{f.name}", getattr(_DEFAULTS, f.name)))
                           for f in fields(StoredLimits)})
