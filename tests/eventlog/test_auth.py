"""Who may talk to the embedded nats-server: users with passwords generated into its directory (0600,
stable across restarts), clients connect with them (eventlog.connect), a client without them is refused."""
from __future__ import annotations

import asyncio
import stat

import nats
import nats.errors
import pytest

from eventlog import (DEFAULT_USER, EmbeddedNats, JetStreamRecorder, NatsAuth, NatsAuthorizationError, NatsUser,
                      StreamSpec, connect, redact_url, stored_auth)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_credentials_are_private_stable_and_never_in_the_log(tmp_path):
    with EmbeddedNats(tmp_path, users=(NatsUser(DEFAULT_USER), NatsUser("other"))) as server:
        auth = server.auth()
        assert auth.user == DEFAULT_USER and auth.password and len(auth.password) >= 32
        assert server.auth("other").password != auth.password
        path = server.password_file(DEFAULT_USER)
        assert path.read_text().strip() == auth.password
        assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
        assert _mode(server.settings.config_path) == 0o600
        assert auth.password not in repr(auth) and auth.password not in str(auth)
    with EmbeddedNats(tmp_path) as again:  # the same directory: the same credentials
        assert again.auth() == auth == stored_auth(tmp_path)
    assert auth.password not in (tmp_path / "nats-server.log").read_text()


async def test_a_client_without_credentials_is_refused(tmp_path):
    async with EmbeddedNats(tmp_path) as server:
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(server.url, allow_reconnect=False)
        # eventlog's connect fails at once, even where the client would retry forever
        for auth in (None, NatsAuth(user=DEFAULT_USER, password="not-the-password")):
            with pytest.raises(NatsAuthorizationError, match="refused") as err:
                await asyncio.wait_for(connect(server.url, auth, name="t", max_reconnect_attempts=-1), 30)
            assert "not-the-password" not in str(err.value)
        nc = await connect(server.url, server.auth(), name="t")
        assert nc.is_connected
        await nc.close()
        rec = await JetStreamRecorder.connect(server.client_url(), StreamSpec(name="T", subject_prefix="t.j"))
        assert (await rec.append("t.j.a.b", b"x")).seq == 1   # a password in the URL works as well
        await rec.close()


def test_redact_url_hides_userinfo():
    assert redact_url("nats://alice:s3cret@host:4222") == "nats://***@host:4222"
    assert redact_url("nats://tok3n@host:4222") == "nats://***@host:4222"
    assert redact_url("nats://host:4222") == "nats://host:4222"
    assert redact_url("nats://a:b@h1:1,nats://c:d@h2:2") == "nats://***@h1:1,nats://***@h2:2"
