"""The lease-mode flags of `aotx boot` and `aotx serve` (docs/SCALE.md §2): `--leases`, `--lease-ttl`,
`--lease-election`."""
from __future__ import annotations

import argparse

from aotx.runtime.ownership import DEFAULT_ELECTION, DEFAULT_TTL, LeasePolicy


def add_lease_arguments(p: argparse.ArgumentParser, leases_help: str) -> None:
    p.add_argument("--leases", action="store_true", help=leases_help)
    p.add_argument("--lease-ttl", type=float, default=DEFAULT_TTL, metavar="SECONDS",
                   help=f"lease mode: seconds a runtime's lease outlives its last renewal (default {DEFAULT_TTL:g}): "
                        "a dead runtime's lineages are taken over within it")
    p.add_argument("--lease-election", type=float, default=DEFAULT_ELECTION, metavar="SECONDS",
                   help=f"lease mode: the longest JetStream election (the lease bucket not answering) a held lease "
                        f"must ride out (default {DEFAULT_ELECTION:g}, nats-server's longest election timeout); the "
                        "renewal cadence follows from it, and a --lease-ttl too short for it is refused; 0: whatever "
                        "renewing every TTL/3 rides out (a longer election moves the lease)")


def lease_policy(args: argparse.Namespace) -> LeasePolicy | None:
    """The policy of `--leases` (ValueError for a TTL it cannot use), else None."""
    return LeasePolicy(ttl=args.lease_ttl, election=args.lease_election) if args.leases else None
