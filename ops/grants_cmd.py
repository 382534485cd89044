"""`aotx grants --config GATEWAY.json --out DIR`: write the deployment grant file (no tokens)."""
from __future__ import annotations

import argparse
import sys

from api.gateway_config import GatewayConfigError, load_gateway_config
from aotx.runtime_file import write_grants


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the gateway config (principals, token digests, actions)")
    p.add_argument("--out", required=True, help="directory of the grant file (written as DIR/grants.json)")


def run(args: argparse.Namespace) -> int:
    try:
        config = load_gateway_config(args.config)
    except GatewayConfigError as exc:
        print(f"aotx grants: {exc}", file=sys.stderr)
        return 1
    path = write_grants(args.out, config.actions(), config.config_sha256)
    print(f"aotx grants: wrote {path} for {len(config.principals)} principal(s) "
          f"(config {config.config_sha256[:12]}…)", file=sys.stderr)
    return 0
