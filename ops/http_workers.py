"""The HTTP worker processes of `aotx serve --http-workers N`: sockets, spawn, readiness, stop.

Each worker gets its own listening socket of the one public host:port (SO_REUSEPORT: the kernel
spreads new connections over them), passed as an inherited file descriptor to a freshly started
interpreter (`python -m ops.http_worker`: spawned, never forked from a process that holds CUDA), in a
session of its own so that a terminal's Ctrl-C reaches the main process alone, which stops them.
A worker that dies is logged with its exit status and started again on a fresh socket of the same port
(ops.worker_restarts: backoff, no more restarts after a crash loop); meanwhile the others keep serving
(the engine cancels the dead worker's generations when its heartbeat stops: aotx.engine_service). Once
the server stops (`stopping`), nothing is started again.
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
import time

from ops.worker_restarts import RestartPolicy

log = logging.getLogger("aotx.http_workers")
SPEC_ENV = "AOTX_HTTP_WORKER"   # the worker's settings, JSON (ops.http_worker reads it; not imported here: it loads httpx)
READY_TIMEOUT = 120.0   # seconds for every worker to load the tokenizer, connect and listen


class WorkersFailed(Exception):
    """A worker did not start listening."""


def auto_workers() -> int:
    """`--http-workers auto`: min(8, cores - 2), at least 1."""
    return max(1, min(8, (os.cpu_count() or 1) - 2))


def bind_reuseport(host: str, port: int, count: int, *, listen: bool = True) -> list[socket.socket]:
    """`count` listening sockets on one host:port (port 0: the first decides it). `listen=False`: bound
    only, so the kernel hands them no connection until their worker serves (api.server listens then)."""
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
            if listen:
                sock.listen(1024)
    except OSError:
        for sock in out:
            sock.close()
        raise
    return out


WORKER_COMMAND = (sys.executable, "-m", "ops.http_worker")


class HttpWorkers:
    """`command`: what a worker runs (a test gives a stand-in); `policy`: a RestartPolicy per worker."""

    def __init__(self, sockets: list[socket.socket], spec: dict, *, command: tuple[str, ...] = WORKER_COMMAND,
                 policy=RestartPolicy) -> None:
        self._sockets = sockets
        self._spec = spec
        self._command, self._policy = command, policy
        self.procs: list[asyncio.subprocess.Process] = []
        self._watchers: list[asyncio.Task] = []
        self._policies: list[RestartPolicy] = []
        self.stopping = False
        self.restarts = 0        # workers started again after an exit
        self.exits = 0           # workers that exited while the server was not stopping
        self.given_up: list[int] = []   # indexes left dead after a crash loop

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def snapshot(self) -> dict:
        """The figures of /v1/stats' `http_workers`."""
        return {"workers": len(self.procs), "pids": [p.pid for p in self.procs if p.returncode is None],
                "exits": self.exits, "restarts": self.restarts, "given_up": list(self.given_up)}

    async def _spawn(self, index: int, sock: socket.socket) -> asyncio.subprocess.Process:
        fd = sock.fileno()
        env = {**os.environ, SPEC_ENV: json.dumps({**self._spec, "fd": fd, "index": index})}
        try:
            return await asyncio.create_subprocess_exec(
                *self._command, env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, start_new_session=True)
        finally:
            sock.close()   # the worker holds it now

    async def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Spawn every worker and wait until each has said `ready`; raise WorkersFailed otherwise."""
        for index, sock in enumerate(self._sockets):
            self.procs.append(await self._spawn(index, sock))
            self._policies.append(self._policy())
        try:
            await asyncio.wait_for(asyncio.gather(*(self._ready(p) for p in self.procs)), timeout)
        except TimeoutError:
            raise WorkersFailed(f"the HTTP workers did not listen within {timeout:g} s") from None
        loop = asyncio.get_running_loop()
        self._watchers = [loop.create_task(self._supervise(i)) for i in range(len(self.procs))]

    async def _ready(self, proc: asyncio.subprocess.Process) -> None:
        line = await proc.stdout.readline()
        if line.strip() != b"ready":
            raise WorkersFailed(f"HTTP worker {proc.pid} ended before it listened (exit {await proc.wait()})")

    async def _supervise(self, index: int) -> None:
        """Worker `index`: when it exits, start it again (backoff) until the server stops or it crash-loops."""
        while True:
            proc = self.procs[index]
            code = await proc.wait()
            if self.stopping:
                return
            self.exits += 1
            alive = sum(1 for p in self.procs if p.returncode is None)
            delay = self._policies[index].exited(time.monotonic())
            if delay is None:
                self.given_up.append(index)
                log.error("HTTP worker %d (pid %d) exited with %s, %d exits within %g s: a crash loop, "
                          "NOT started again; %d worker(s) keep serving", index, proc.pid, code,
                          self._policies[index].loop_exits, self._policies[index].window, alive)
                return
            log.warning("HTTP worker %d (pid %d) exited with %s; %d worker(s) keep serving; restarting it in "
                        "%.1f s", index, proc.pid, code, alive, delay)
            await asyncio.sleep(delay)
            if self.stopping:
                return
            await self._restart(index)

    async def _restart(self, index: int) -> None:
        try:
            # unlistened until the new worker serves: meanwhile every connection goes to the live ones
            sock = bind_reuseport(self._spec["host"], self._spec["port"], 1, listen=False)[0]
            proc = self.procs[index] = await self._spawn(index, sock)
        except OSError as exc:   # the port or the interpreter is not there: counts as one more exit
            log.warning("HTTP worker %d could not be started again: %s", index, exc)
            return
        try:
            await asyncio.wait_for(self._ready(proc), READY_TIMEOUT)
        except (WorkersFailed, TimeoutError) as exc:
            log.warning("HTTP worker %d (pid %d) did not listen again: %s", index, proc.pid, exc)
            if proc.returncode is None:
                proc.kill()
            return
        self.restarts += 1
        log.warning("HTTP worker %d started again (pid %d)", index, proc.pid)

    def signal_all(self, sig: int = signal.SIGTERM) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:   # it ended between the look and the signal
                    pass

    async def stop(self, timeout: float) -> None:
        """SIGTERM every worker (each drains like `aotx serve`), wait up to `timeout`, then SIGKILL.
        Nothing is started again from here on."""
        self.stopping = True
        for task in self._watchers:   # no restart from here on (a worker being started is in procs already)
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
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
