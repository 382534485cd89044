"""Start `aotx` subcommands as real processes, wait for their ready line, stop them for sure."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from aotx.runtime_file import read_runtime_file
from eventlog import DEFAULT_USER, EmbeddedNats, NatsUser
from ops.nats_users import split_users
from ops.shared_stack import stream_spec
from tests.server_process import stop_gracefully

AOTX = str(Path(sys.executable).with_name("aotx"))


class Proc:
    def __init__(self, *args: str, ready: str, timeout: float = 60.0) -> None:
        self.cmd = [AOTX, *args]
        self.ready = re.compile(ready)
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.match: re.Match | None = None
        self._event = threading.Event()

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def _pump(self) -> None:
        assert self.proc and self.proc.stderr
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            m = self.ready.search(line)
            if m and not self._event.is_set():
                self.match = m
                self._event.set()

    def start(self) -> "Proc":
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(self.cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not self._event.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.cmd[1]} did not start:\n{self.stderr[-4000:]}")
        return self

    def stop(self) -> int | None:
        return None if self.proc is None else stop_gracefully(self.proc)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_aotx(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([AOTX, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})


def files_containing(root: Path, needles: list[str]) -> list[str]:
    """Every file under root whose bytes contain one of the needles (tokens must never be there)."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path}: {n[:16]}…" for n in needles if n.encode() in data]
    return hits


def split_nats(data_dir, rt) -> EmbeddedNats:
    """A nats-server with the split deployment's users (runtime, gateway) and `aotx` for the tools."""
    rf = read_runtime_file(rt)
    return EmbeddedNats(data_dir, users=(NatsUser(DEFAULT_USER), *split_users(rf.name, stream_spec(rf))))
