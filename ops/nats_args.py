"""The `--nats URL` option and its credentials, the same for every command that talks to NATS.

Credentials, as nats-py's connect() takes them: user:password@ or token@ in the URL, or
`--nats-user NAME --nats-password-file FILE`, `--nats-token-file FILE`, `--nats-creds FILE` (a
`.creds` file: user JWT + nkey seed) or `--nats-nkey FILE` (an nkey seed file). Secrets are read
from files (never from the command line, where `ps` shows them) and never printed.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlsplit

from eventlog import EmbeddedNats, NatsAuth

CREDENTIAL_FLAGS = ("nats_user", "nats_password_file", "nats_token_file", "nats_creds", "nats_nkey")


class NatsArgsError(ValueError):
    """The NATS options do not make one usable set of credentials."""


def add_nats_arguments(p: argparse.ArgumentParser, *, required: bool, help: str) -> None:
    p.add_argument("--nats", required=required, metavar="URL",
                   help=f"{help}; may hold user:password@ or token@ (or use the --nats-* credential options)")
    g = p.add_argument_group("NATS credentials (for --nats; see README, 'Who may talk to the log')")
    g.add_argument("--nats-user", metavar="NAME", help="NATS user name (with --nats-password-file)")
    g.add_argument("--nats-password-file", metavar="FILE", help="file holding the NATS user's password")
    g.add_argument("--nats-token-file", metavar="FILE", help="file holding a NATS authentication token")
    g.add_argument("--nats-creds", metavar="FILE", help="NATS .creds file (user JWT and nkey seed)")
    g.add_argument("--nats-nkey", metavar="FILE", help="NATS nkey seed file")


def _secret(path: str, what: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise NatsArgsError(f"cannot read the {what} file {path}: {exc.strerror or type(exc).__name__}") from None
    if not text:
        raise NatsArgsError(f"the {what} file {path} is empty")
    return text


def _existing(path: str, what: str) -> str:
    if not Path(path).is_file():
        raise NatsArgsError(f"the {what} file {path} does not exist")
    return path


def nats_auth(args: argparse.Namespace) -> NatsAuth | None:
    """The credentials the options name, None when they name none (then the URL's own, if any, apply)."""
    given = [f for f in CREDENTIAL_FLAGS if getattr(args, f, None)]
    if not given:
        return None
    if not getattr(args, "nats", None):
        raise NatsArgsError("the --nats-* credential options need --nats URL")
    if "@" in (urlsplit(args.nats.split(",")[0]).netloc or ""):
        raise NatsArgsError("give the NATS credentials once: in the --nats URL or as --nats-* options, not both")
    kinds = {"password": bool(args.nats_user or args.nats_password_file), "token": bool(args.nats_token_file),
             "creds": bool(args.nats_creds), "nkey": bool(args.nats_nkey)}
    if sum(kinds.values()) > 1:
        raise NatsArgsError("give one kind of NATS credentials: --nats-user/--nats-password-file, "
                            "--nats-token-file, --nats-creds or --nats-nkey")
    if kinds["password"]:
        if not (args.nats_user and args.nats_password_file):
            raise NatsArgsError("--nats-user and --nats-password-file go together")
        return NatsAuth(user=args.nats_user, password=_secret(args.nats_password_file, "NATS password"))
    if kinds["token"]:
        return NatsAuth(token=_secret(args.nats_token_file, "NATS token"))
    if kinds["creds"]:
        return NatsAuth(user_credentials=_existing(args.nats_creds, "NATS .creds"))
    return NatsAuth(nkeys_seed=_existing(args.nats_nkey, "NATS nkey seed"))



def embedded_flags(server: EmbeddedNats, user: str, url: str | None = None) -> list[str]:
    """--nats (`url`, default the server's) and the credential options for a child process that connects
    to `server` as `user` (its password file, never the password itself, goes on the command line)."""
    return ["--nats", url or server.url, "--nats-user", user,
            "--nats-password-file", str(server.password_file(user))]
