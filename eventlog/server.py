"""An embedded nats-server with JetStream that lives and dies with this process."""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from collections.abc import Sequence

from .binary import find_nats_server
from .connect import NatsAuth
from .dirlock import DirectoryLock, DirectoryLocked
from .server_auth import NatsUser, password_path, stored_auth
from .server_config import ClusterRoutes, ServerSettings, write_config

_PR_SET_PDEATHSIG = 1


class NatsServerError(RuntimeError):
    """The embedded server did not start or stopped unexpectedly."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class EmbeddedNats:
    """Start with `with EmbeddedNats(dir) as srv:` or `async with`; `srv.url` is the server's address and
    `srv.auth()` the credentials a client connects with (`srv.client_url()`: both in one URL).

    Only known users may connect: `users` (default: one unrestricted user `aotx`), each with a
    password generated into `dir/users/<name>` (0600) at the first start and kept for later ones.

    The child gets SIGKILL if this process dies (Linux PDEATHSIG), and is stopped at
    interpreter exit. Start it from the main thread: PDEATHSIG follows the starting thread.

    One server per store: start() takes an exclusive lock on `data_dir` (DirectoryLock, file
    `lock`) before it writes anything, and the child holds it too, so a second EmbeddedNats on the
    same directory (in this or another process) fails with NatsServerError and touches nothing, while
    a store whose owner died (kill -9) is free as soon as its nats-server is gone. It polls up to
    `lock_wait` seconds for an owner that is dying. The lock is held from start() to stop(),
    across kill() and restart().
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        binary: str | Path | None = None,
        sync_interval: str = "always",
        max_file_store: int | None = None,
        start_timeout: float = 15.0,
        stop_timeout: float = 5.0,
        lock_wait: float = 5.0,
        users: Sequence[NatsUser] | None = None,
        cluster: ClusterRoutes | None = None,
        server_name: str = "aotx-embedded",
        shared_secrets: str | Path | None = None,
    ) -> None:
        self.settings = ServerSettings(
            data_dir=Path(data_dir).resolve(), host=host, port=port,
            sync_interval=sync_interval, max_file_store=max_file_store, server_name=server_name,
            cluster=cluster, shared_secrets=Path(shared_secrets).resolve() if shared_secrets else None,
            **({} if users is None else {"users": tuple(users)}),
        )
        self.binary = Path(binary) if binary else find_nats_server()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.lock_wait = lock_wait
        self._lock = DirectoryLock(self.settings.data_dir)
        self._proc: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self._port: int | None = port

    # -- state -------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._url is None:
            raise NatsServerError("nats-server is not running")
        return self._url

    @property
    def port(self) -> int | None:
        return self._port

    def auth(self, user: str | None = None) -> NatsAuth:
        """The credentials of `user` (default: the first user, `aotx` unless `users` says otherwise)."""
        return stored_auth(self.settings.secrets_dir, user or self.settings.users[0].name)

    def password_file(self, user: str | None = None) -> Path:
        return password_path(self.settings.secrets_dir, user or self.settings.users[0].name)

    def client_url(self, user: str | None = None) -> str:
        """The URL with `user`'s name and password in it, for a client that takes one string (tests, tools).
        Never print it: eventlog.redact_url() hides the password."""
        auth = self.auth(user)
        return self.url.replace("://", f"://{auth.user}:{auth.password}@", 1)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- start -------------------------------------------------------------
    def _spawn(self) -> None:
        if self.running:
            raise NatsServerError(f"nats-server already running (pid {self.pid})")
        try:
            self._lock.acquire(wait=self.lock_wait)
        except DirectoryLocked as exc:
            raise NatsServerError(f"the nats store {exc}") from None
        settings = self.settings
        if self._port is not None and settings.port is None:
            settings = ServerSettings(**{**settings.__dict__, "port": self._port})
        config = write_config(settings)
        for stale in settings.ports_dir.glob("*.ports"):
            stale.unlink()
        log = open(settings.log_path, "ab")
        try:
            self._proc = subprocess.Popen(
                [str(self.binary), "-c", str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent, pass_fds=(self._lock.fileno(),),  # the child holds the lock too
            )
        finally:
            log.close()
        atexit.register(self.stop)

    def _poll_ready(self) -> bool:
        """One readiness probe: ports file written and the listener answers INFO with JetStream on."""
        proc = self._proc
        assert proc is not None
        if proc.poll() is not None:
            raise NatsServerError(f"nats-server exited with {proc.returncode}: {self.log_tail()}")
        ports_file = self.settings.ports_dir / f"{self.binary.name}_{proc.pid}.ports"
        if not ports_file.exists():
            return False
        try:
            urls = json.loads(ports_file.read_text()).get("nats") or []
        except json.JSONDecodeError:
            return False
        if not urls:
            return False
        url = urls[0]
        host_port = url.rsplit("/", 1)[-1]
        host, port = host_port.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=1.0) as sock:
                info = sock.recv(4096)
        except OSError:
            return False
        if not info.startswith(b"INFO ") or b'"jetstream":true' not in info:
            return False
        self._url, self._port = url, int(port)
        return True

    def _start_failed(self) -> NatsServerError:
        self._terminate()
        self._lock.release()
        return NatsServerError(f"nats-server not ready within {self.start_timeout}s: {self.log_tail()}")

    def start(self) -> "EmbeddedNats":
        self._spawn()
        deadline = time.monotonic() + self.start_timeout
        while not self._poll_ready():
            if time.monotonic() > deadline:
                raise self._start_failed()
            time.sleep(0.02)
        return self

    async def start_async(self) -> "EmbeddedNats":
        self._spawn()
        deadline = time.monotonic() + self.start_timeout
        while not self._poll_ready():
            if time.monotonic() > deadline:
                raise self._start_failed()
            await asyncio.sleep(0.02)
        return self

    # -- stop --------------------------------------------------------------
    def _terminate(self) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc, self._url = None, None
        atexit.unregister(self.stop)
        return proc.returncode

    def stop(self) -> int | None:
        """SIGTERM, wait, then SIGKILL; frees the store. Returns the exit status (None if it was not running)."""
        try:
            return self._terminate()
        finally:
            self._lock.release()

    async def stop_async(self) -> int | None:
        return await asyncio.to_thread(self.stop)

    def kill(self) -> None:
        """SIGKILL with no shutdown (recovery drills). The port is kept for restart()."""
        proc = self._proc
        if proc is None:
            return
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self._proc, self._url = None, None
        atexit.unregister(self.stop)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a hung node, for drills). Returns
        once every thread has stopped (the stop reported to us, its parent): SIGSTOP's delivery lags
        kill() on a loaded machine, and the server answered one more request after a bare kill()."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGSTOP)
            os.waitpid(self._proc.pid, os.WUNTRACED)

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)

    def restart(self) -> "EmbeddedNats":
        """Start again on the same store directory and the same port."""
        self._terminate()
        return self.start()

    async def restart_async(self) -> "EmbeddedNats":
        await asyncio.to_thread(self._terminate)  # the store stays ours
        return await self.start_async()

    def log_tail(self, lines: int = 5) -> str:
        path = self.settings.log_path
        if not path.exists():
            return "(no log)"
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- context managers ----------------------------------------------------
    def __enter__(self) -> "EmbeddedNats":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> "EmbeddedNats":
        return await self.start_async()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_async()
