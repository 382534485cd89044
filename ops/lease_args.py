"""The lease-mode flags of `aotx boot` and `aotx serve` (docs/SCALE.md §2): `--leases`, `--lease-ttl`."""
from __future__ import annotations

import argparse

from aotx.runtime.ownership import LeasePolicy


def add_lease_arguments(p: argparse.ArgumentParser, leases_help: str) -> None:
    p.add_argument("--leases", action="store_true", help=leases_help)
    p.add_argument("--lease-ttl", type=float, default=LeasePolicy().ttl, metavar="SECONDS",
                   help=f"lease mode: seconds a runtime's lease outlives its last renewal (default {LeasePolicy().ttl:g})")


def lease_policy(args: argparse.Namespace) -> LeasePolicy | None:
    """The policy of `--leases` (ValueError for a TTL it cannot use), else None."""
    return LeasePolicy(ttl=args.lease_ttl) if args.leases else None
