"""Start and stop a real `aotx serve` process for end-to-end tests."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import httpx

from tests.waiting import wait_until

READY = re.compile(r"serving \S+ on (http://\S+) ")
EXTRA_ARGS_ENV = "AOTX_TEST_SERVE_ARGS"



def stop_gracefully(proc: subprocess.Popen, timeout: float = 15.0) -> int | None:
    """SIGTERM a running process and wait; SIGKILL it when it does not end within `timeout`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode

class ServerProcess:
    # the started, not yet stopped servers of this process (tests/cpu_times.py samples their CPU per test)
    live: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()

    def __init__(self, *args: str, env: dict | None = None, startup_timeout: float = 120.0,
                 var: str | Path | None = None, new_session: bool = False) -> None:
        exe = Path(sys.executable).with_name("aotx")
        # never the repository's var/: a temporary state directory unless the caller gives one
        self._own_var = var is None
        self.var = Path(var) if var is not None else Path(tempfile.mkdtemp(prefix="aotx-serve-var-"))
        # EXTRA_ARGS_ENV: flags a test module adds to every server it starts (tests/e2e/test_http_workers_stored.py)
        extra = os.environ.get(EXTRA_ARGS_ENV, "").split()
        self.cmd = [str(exe), "serve", "--port", "0", "--var", str(self.var), *args, *extra]
        self.env = {**os.environ, **(env or {})}
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.base_url: str | None = None
        self.stderr_lines: list[str] = []
        self.new_session = new_session   # its own process group (the embedded nats-server joins it)
        self._ready = threading.Event()
        self._pump_thread: threading.Thread | None = None

    def _pump(self) -> None:
        assert self.proc and self.proc.stderr
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stderr_lines.append(line)
            m = READY.search(line)
            if m and not self._ready.is_set():
                self.base_url = m.group(1)
                self._ready.set()

    def start(self) -> "ServerProcess":
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=self.new_session)
        ServerProcess.live.add(self)
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("aotx serve did not start:\n" + "\n".join(self.stderr_lines[-40:]))
        try:
            wait_until(self._healthy, "aotx serve to answer /health", timeout=max(deadline - time.monotonic(), 0.0))
        except AssertionError:
            self.stop()
            raise RuntimeError("aotx serve never answered /health:\n" + "\n".join(self.stderr_lines[-40:])) from None
        return self

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_exit(self, timeout: float) -> int | None:
        """The exit status once the process has ended within `timeout` seconds (None if it has not),
        with every stderr line read."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._pump_thread is not None:
            self._pump_thread.join(timeout=5)
        return code

    def stop(self) -> None:
        ServerProcess.live.discard(self)
        if self.proc:
            stop_gracefully(self.proc)
        if self._own_var:
            shutil.rmtree(self.var, ignore_errors=True)
