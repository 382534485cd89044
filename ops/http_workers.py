"""The HTTP worker processes of `aotx serve --http-workers N`: sockets, spawn, readiness, stop.

Each worker gets its own listening socket of the one public host:port (SO_REUSEPORT: the kernel
spreads new connections over them), passed as an inherited file descriptor to a freshly started
interpreter (`python -m ops.http_worker`: spawned, never forked from a process that holds CUDA), in a
session of its own so that a terminal's Ctrl-C reaches the main process alone, which stops them.
A worker that dies is logged; the others keep serving (the engine cancels its generations when its
heartbeat stops: aotx.engine_service).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys

from ops.http_worker import SPEC_ENV

log = logging.getLogger("aotx.http_workers")
READY_TIMEOUT = 120.0   # seconds for every worker to load the tokenizer, connect and listen


class WorkersFailed(Exception):
    """A worker did not start listening."""


def auto_workers() -> int:
    """`--http-workers auto`: min(8, cores - 2), at least 1."""
    return max(1, min(8, (os.cpu_count() or 1) - 2))


def bind_reuseport(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one host:port (port 0: the first decides it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    out: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]
            sock.listen(1024)
    except OSError:
        for sock in out:
            sock.close()
        raise
    return out


class HttpWorkers:
    def __init__(self, sockets: list[socket.socket], spec: dict) -> None:
        self._sockets = sockets
        self._spec = spec
        self.procs: list[asyncio.subprocess.Process] = []
        self._watchers: list[asyncio.Task] = []
        self.stopping = False

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Spawn every worker and wait until each has said `ready`; raise WorkersFailed otherwise."""
        for index, sock in enumerate(self._sockets):
            fd = sock.fileno()
            env = {**os.environ, SPEC_ENV: json.dumps({**self._spec, "fd": fd, "index": index})}
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ops.http_worker", env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, start_new_session=True)
            sock.close()   # the worker holds it now
            self.procs.append(proc)
        try:
            await asyncio.wait_for(asyncio.gather(*(self._ready(p) for p in self.procs)), timeout)
        except TimeoutError:
            raise WorkersFailed(f"the HTTP workers did not listen within {timeout:g} s") from None
        self._watchers = [asyncio.get_running_loop().create_task(self._watch(i, p)) for i, p in enumerate(self.procs)]

    async def _ready(self, proc: asyncio.subprocess.Process) -> None:
        line = await proc.stdout.readline()
        if line.strip() != b"ready":
            raise WorkersFailed(f"HTTP worker {proc.pid} ended before it listened (exit {await proc.wait()})")

    async def _watch(self, index: int, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if not self.stopping:
            alive = sum(1 for p in self.procs if p.returncode is None)
            log.warning("HTTP worker %d (pid %d) exited with %s; %d worker(s) keep serving",
                        index, proc.pid, code, alive)

    def signal_all(self, sig: int = signal.SIGTERM) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:   # it ended between the look and the signal
                    pass

    async def stop(self, timeout: float) -> None:
        """SIGTERM every worker (each drains like `aotx serve`), wait up to `timeout`, then SIGKILL."""
        self.stopping = True
        for sock in self._sockets:
            sock.close()
        self.signal_all(signal.SIGTERM)
        waits = [p.wait() for p in self.procs]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            log.warning("HTTP workers still running %.1f s after SIGTERM: killed", timeout)
            self.signal_all(signal.SIGKILL)
            await asyncio.gather(*(p.wait() for p in self.procs))
        for task in self._watchers:
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
