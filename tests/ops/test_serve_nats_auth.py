"""`aotx serve`'s embedded nats-server admits only clients with the credentials in VAR/nats/users/: a local
process without them can neither write a forged record into the journal (which would make every later
boot fail closed) nor read it; the credentials are in no log, journal or runtime file."""
from __future__ import annotations

import asyncio

import nats
import nats.errors

from tests.server_process import ServerProcess

from .client import SharedClient
from .procs import files_containing
from .store import embedded_url, journal_state

ARGS = ("--max-batch", "4", "--kv-pages", "64", "--default-max-tokens", "8")
FORGED_SUBJECT = f"aotx.j.{'0' * 32}.mutation"


async def _forge(url: str) -> str:
    """A local client without credentials tries the one publish that would wedge the journal."""
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5)
    except nats.errors.Error as exc:
        return str(exc)
    try:
        await nc.jetstream().publish(FORGED_SUBJECT, b"forged", timeout=5)
        return "published"
    finally:
        await nc.close()


def test_a_client_without_credentials_cannot_wedge_the_journal(tmp_path):
    var = tmp_path / "var"
    first = ServerProcess(*ARGS, var=var).start()
    try:
        alice = SharedClient(first.base_url, (var / "tokens" / "alice").read_text().strip())
        alice.sync()
        assert alice.post("/participant")[0] == 201
        before = asyncio.run(journal_state(var, "AOTX_JOURNAL"))
        assert "Authorization Violation" in asyncio.run(_forge(embedded_url(var)))
        assert asyncio.run(journal_state(var, "AOTX_JOURNAL")) == before
    finally:
        first.stop()
    second = ServerProcess(*ARGS, var=var).start()   # boots: nothing forged landed
    try:
        alice = SharedClient(second.base_url, (var / "tokens" / "alice").read_text().strip())
        assert alice.sync()["registered"]
    finally:
        second.stop()
    password = (var / "nats" / "users" / "aotx").read_text().strip()
    logs = "\n".join(first.stderr_lines + second.stderr_lines)
    assert password not in logs
    assert sorted(files_containing(var, [password])) == sorted(
        f"{var / 'nats' / p}: {password[:16]}…" for p in ("users/aotx", "nats-server.conf"))
