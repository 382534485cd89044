"""The embedded nats-server launcher."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from eventlog import EmbeddedNats, NatsServerError, find_nats_server, render_config
from eventlog.server_config import ServerSettings

def test_binary_is_found_next_to_the_interpreter():
    path = find_nats_server()
    assert path.name == "nats-server" and os.access(path, os.X_OK)
    assert path.parent == os.path.dirname(sys.executable) or path.exists()


def test_config_has_jetstream_sync_always(tmp_path):
    text = render_config(ServerSettings(data_dir=tmp_path, port=4333))
    assert 'listen: "127.0.0.1:4333"' in text
    assert "sync_interval: always" in text
    assert f'store_dir: "{tmp_path}/jetstream"' in text
    assert 'listen: "127.0.0.1:-1"' in render_config(ServerSettings(data_dir=tmp_path))


def test_free_port_start_stop_and_configured_port(tmp_path):
    with EmbeddedNats(tmp_path / "a") as server:
        pid, port = server.pid, server.port
        assert server.running and server.url == f"nats://127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            assert sock.recv(4096).startswith(b"INFO ")
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_taken_port_fails_with_the_log(tmp_path):
    with EmbeddedNats(tmp_path / "a") as server:
        with pytest.raises(NatsServerError, match="address already in use"):
            EmbeddedNats(tmp_path / "b", port=server.port, start_timeout=5).start()


def test_configured_port_is_used(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with EmbeddedNats(tmp_path, port=port) as server:
        assert server.port == port


@pytest.mark.asyncio(loop_scope="session")
async def test_async_context_and_restart_keep_the_port(tmp_path):
    async with EmbeddedNats(tmp_path) as server:
        port = server.port
        server.kill()
        assert not server.running
        await server.restart_async()
        assert server.port == port and server.running


def test_a_second_server_on_the_same_store_is_refused_and_touches_nothing(tmp_path):
    with EmbeddedNats(tmp_path) as server:
        before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        with pytest.raises(NatsServerError, match="in use by another process") as err:
            EmbeddedNats(tmp_path, start_timeout=5, lock_wait=0).start()
        assert str(tmp_path) in str(err.value)
        assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
        assert server.running
    with EmbeddedNats(tmp_path) as again:  # stopped: the store is free again
        assert again.running
