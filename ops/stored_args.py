"""The stored-state flags of `aotx serve` and `aotx boot` (issue 11): retention of idempotency keys.

`--idempotency-ttl DURATION` (default 24h): how long a finished Idempotency-Key answer is kept and
replayed; then the key reads as absent and a request with it runs afresh. A duration is a positive
whole number of seconds, optionally with a unit: `90s`, `30m`, `24h`, `7d`.
"""
from __future__ import annotations

import argparse
import re

from aotx.stored import StoredLimits
from aotx.stored.limits import DAY

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": DAY}
_DURATION = re.compile(r"([0-9]{1,12})([smhd]?)")


def duration(text: str) -> int:
    """Seconds of a duration flag (argparse type): `3600`, `90s`, `30m`, `24h`, `7d`."""
    m = _DURATION.fullmatch(text.strip().lower())
    seconds = int(m.group(1)) * _UNITS[m.group(2)] if m else 0
    if not 1 <= seconds <= 1 << 40:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration (e.g. 3600, 90s, 30m, 24h, 7d)")
    return seconds


def add_stored_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--idempotency-ttl", type=duration, default=StoredLimits().idempotency_ttl, metavar="DURATION",
                   help="how long a finished Idempotency-Key answer is kept and replayed (default 24h; "
                        "seconds, or with a unit: 90s, 30m, 24h, 7d); then the key runs afresh")


def stored_limits(args: argparse.Namespace) -> StoredLimits:
    return StoredLimits(idempotency_ttl=int(getattr(args, "idempotency_ttl", StoredLimits().idempotency_ttl)))
