"""`aotx cluster`: three nodes on loopback, their seed URLs printed, all stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys

from eventlog import JetStreamRecorder, StreamSpec, stored_auth
from eventlog.cluster import free_ports


def consecutive_free(n: int, avoid: range = range(0)) -> int:
    """A port p with p .. p+n-1 all free on loopback now, none in `avoid` (the command numbers its
    nodes' ports so)."""
    for base in free_ports(20):
        if set(range(base, base + n)) & set(avoid):
            continue
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


def test_aotx_cluster_starts_prints_its_seeds_and_stops_on_sigterm(tmp_path):
    client = consecutive_free(3)
    route = consecutive_free(3, avoid=range(client, client + 3))
    ports = [client, client + 1, client + 2, route]
    data = (tmp_path / "c").resolve()
    proc = subprocess.Popen([sys.executable, "-m", "ops.cli", "cluster", "--dir", str(data), "--port", str(ports[0]),
                             "--cluster-port", str(ports[3])], stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:   # until the ready block (or the end of a failed start)
            lines.append(line)
            if "Ctrl-C" in line:
                break
        text = "".join(lines)
        seeds = ",".join(f"nats://127.0.0.1:{p}" for p in ports[:3])
        assert f"seeds: {seeds}" in text, text
        assert f"--nats-user aotx --nats-password-file {data / 'users' / 'aotx'}" in text, text

        async def replicas() -> int:
            rec = await JetStreamRecorder.connect(seeds, StreamSpec(name="CMD"), auth=stored_auth(data))
            try:
                return (await rec.js.stream_info("CMD")).config.num_replicas
            finally:
                await rec.close()
        assert asyncio.run(replicas()) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    for port in ports[:3]:   # every node is gone: nothing listens on its client port any more
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
