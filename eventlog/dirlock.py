"""An exclusive lock on a directory: flock(2) on a lock file inside it.

The lock belongs to the open file, so it dies with the last process holding the descriptor (kill -9
never leaves a stale lock) and a child started with the descriptor (pass_fds) holds it as long as it
lives. The file holds the pid of the process that took the lock, for the message of whoever is refused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

LOCK_FILE = "lock"


class DirectoryLocked(RuntimeError):
    """Another process holds the directory's lock."""

    def __init__(self, path: Path, holder: str) -> None:
        who = f"pid {holder}" if holder else "pid unknown"
        super().__init__(f"{path.parent} is in use by another process ({who}; lock file {path})")
        self.directory, self.path = path.parent, path


class DirectoryLock:
    """`DirectoryLock(dir).acquire()` or raise DirectoryLocked; held until release() or the process ends."""

    def __init__(self, directory: str | Path, name: str = LOCK_FILE) -> None:
        self.directory = Path(directory)
        self.path = self.directory / name
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def fileno(self) -> int:
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not held")
        return self._fd

    def acquire(self, wait: float = 0.0) -> "DirectoryLock":
        """Take the lock; poll up to `wait` seconds while another process holds it."""
        if self._fd is not None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                    os.close(fd)
                    raise DirectoryLocked(self.path, holder) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Close our descriptor: the lock ends once no child holding a copy of it lives either."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> "DirectoryLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
