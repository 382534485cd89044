"""`aotx cluster`: a JetStream cluster of nats-servers on loopback, for development and drills.

    aotx cluster [--dir var/cluster] [--size 3] [--port 4222] [--cluster-port 6222]

Starts `--size` nodes (client ports PORT, PORT+1, …; route ports CLUSTER-PORT, …; each with its own
store under DIR/n1, DIR/n2, …, `sync_interval: always`, the same user `aotx` with the password kept
in DIR/users/aotx), waits until the cluster's JetStream answers, prints the seed URLs and the flags
that `aotx serve` / `aotx boot` / `aotx gateway` take to use it, and runs until Ctrl-C or SIGTERM
(then stops every node). Streams AOTX creates on it get three replicas (docs/SCALE.md).
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from eventlog import DEFAULT_USER, EmbeddedCluster, NatsServerError



def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", default="var/cluster", help="data directory of the nodes (default var/cluster)")
    p.add_argument("--size", type=int, default=3, help="nodes (default 3)")
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=4222, help="client port of node 1; node i listens on PORT+i-1")
    p.add_argument("--cluster-port", type=int, default=6222, help="route port of node 1 (default 6222)")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.size <= 9:
        print("aotx cluster: --size must be 1..9", file=sys.stderr)
        return 2
    cluster = EmbeddedCluster(Path(args.dir), size=args.size, host=args.host,
                              client_ports=[args.port + i for i in range(args.size)],
                              cluster_ports=[args.cluster_port + i for i in range(args.size)])
    try:
        cluster.start()   # main thread: each node dies with this process (PDEATHSIG)
    except NatsServerError as exc:
        print(f"aotx cluster: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    password = cluster.password_file(DEFAULT_USER)
    print(f"aotx: cluster of {args.size} nats-servers (JetStream, sync_interval always) under {cluster.data_dir}\n"
          f"  seeds: {cluster.urls}\n"
          f"  use:   --nats {cluster.urls} --nats-user {DEFAULT_USER} --nats-password-file {password}\n"
          "  Ctrl-C stops every node", file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        cluster.stop()
    return 0
