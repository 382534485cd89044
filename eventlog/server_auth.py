"""Users of the embedded nats-server: their subject permissions, and passwords kept in its directory.

Each user's password is generated once into `<data_dir>/users/<name>` (directory 0700, file 0600)
and reused at every start of the same directory. The server config (0600 as well) lists the users
in an `authorization` block; nothing else of ours holds a password.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .connect import NatsAuth

DEFAULT_USER = "aotx"   # the one user of `aotx serve`; unrestricted (operators' tools use it too)
USERS_DIR = "users"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class NatsPermissions:
    """nats-server subject permissions of one user. An allow list of None allows every subject; deny wins
    over allow; allow_responses lets the user answer requests it received (reply subjects)."""

    publish_allow: tuple[str, ...] | None = None
    publish_deny: tuple[str, ...] = ()
    subscribe_allow: tuple[str, ...] | None = None
    subscribe_deny: tuple[str, ...] = ()
    allow_responses: bool = False

    def extended(self, *, publish_allow: Iterable[str] = (), subscribe_allow: Iterable[str] = ()) -> "NatsPermissions":
        """The same permissions with more subjects allowed (on allow lists that exist)."""
        pub = None if self.publish_allow is None else (*self.publish_allow, *publish_allow)
        sub = None if self.subscribe_allow is None else (*self.subscribe_allow, *subscribe_allow)
        return NatsPermissions(pub, self.publish_deny, sub, self.subscribe_deny, self.allow_responses)

    def render(self) -> dict:
        out: dict = {}
        for verb, allow, deny in (("publish", self.publish_allow, self.publish_deny),
                                  ("subscribe", self.subscribe_allow, self.subscribe_deny)):
            rule = {}
            if allow is not None:
                rule["allow"] = list(allow)
            if deny:
                rule["deny"] = list(deny)
            if rule:
                out[verb] = rule
        if self.allow_responses:
            out["allow_responses"] = True
        return out


@dataclass(frozen=True)
class NatsUser:
    """A user of the embedded server; permissions None: every subject."""

    name: str
    permissions: NatsPermissions | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"nats user name {self.name!r}: use 1-64 letters, digits, '_' or '-'")


def password_path(data_dir: Path, user: str) -> Path:
    return Path(data_dir) / USERS_DIR / user


def ensure_passwords(data_dir: Path, users: Iterable[NatsUser]) -> dict[str, str]:
    """Each user's password, generated (0600) where it does not exist yet."""
    folder = Path(data_dir) / USERS_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    out: dict[str, str] = {}
    for user in users:
        path = folder / user.name
        if not path.exists():
            write_private(path, secrets.token_urlsafe(32) + "\n")
        out[user.name] = path.read_text().strip()
    return out


def stored_auth(data_dir: str | Path, user: str = DEFAULT_USER) -> NatsAuth:
    """The credentials of `user` of the embedded server on `data_dir` (written at its first start)."""
    path = password_path(Path(data_dir), user)
    try:
        password = path.read_text().strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"no nats credentials for user {user} under {path.parent}") from None
    return NatsAuth(user=user, password=password)


def render_authorization(users: Iterable[NatsUser], passwords: Mapping[str, str]) -> list[str]:
    """The `authorization { users = [...] }` block; strings JSON-quoted (the NATS parser accepts JSON)."""
    lines = ["authorization {", "  users = ["]
    for user in users:
        entry: dict = {"user": user.name, "password": passwords[user.name]}
        if user.permissions is not None:
            entry["permissions"] = user.permissions.render()
        lines.append(f"    {json.dumps(entry)}")
    lines += ["  ]", "}"]
    return lines


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 from the first byte on (replacing what was there)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)

