"""The log on a 3-node JetStream cluster (issue 15 part 1): seeds, replicas, a leader's death."""

from __future__ import annotations

import asyncio
import time

import nats.errors
import pytest

from eventlog import EmbeddedNats, JetStreamRecorder, StreamSpec, connect
from eventlog.connect import seed_urls
from eventlog.errors import EventLogError
from eventlog.media import MediaStore
from eventlog.server_config import ClusterRoutes, ServerSettings, render_config
from eventlog.snapshot_bucket import SnapshotBucket

from .conftest import node_named


def test_seed_urls_split_on_commas():
    assert seed_urls("nats://a:1") == ["nats://a:1"]
    assert seed_urls(" nats://a:1, nats://b:2,,nats://c:3 ") == ["nats://a:1", "nats://b:2", "nats://c:3"]
    with pytest.raises(ValueError):
        seed_urls(" , ")


def test_a_node_config_names_its_cluster_and_routes(tmp_path):
    text = render_config(ServerSettings(data_dir=tmp_path, port=4222, server_name="aotx-n1",
                                        cluster=ClusterRoutes("aotx", 6222, ("nats-route://127.0.0.1:6223",))))
    assert text.endswith('cluster {\n  name: "aotx"\n  listen: "127.0.0.1:6222"\n'
                         '  routes: ["nats-route://127.0.0.1:6223"]\n}\n')
    assert 'server_name: "aotx-n1"' in text and "sync_interval: always" in text


def test_every_node_has_its_store_and_the_same_users(cluster):
    dirs = {n.settings.store_dir for n in cluster.nodes}
    assert len(dirs) == 3
    assert {n.password_file() for n in cluster.nodes} == {cluster.password_file()}
    for node in cluster.nodes:
        assert "sync_interval: always" in node.settings.config_path.read_text()


async def test_streams_get_three_replicas_on_a_cluster_and_one_alone(cluster, tmp_path):
    rec = await JetStreamRecorder.connect(cluster.urls, StreamSpec(name="REPL", subject_prefix="repl.j"),
                                          auth=cluster.auth())
    try:
        info = await rec.js.stream_info("REPL")
        assert info.config.num_replicas == 3
        assert info.cluster is not None and len(info.cluster.replicas or []) == 2
        media = await MediaStore.attach(rec.nc, "REPLMEDIA")
        snaps = await SnapshotBucket.attach(rec.nc, "REPL")
        for stream in ("OBJ_REPLMEDIA", "KV_REPLMEDIA_OWNERS", snaps.stream):
            assert (await rec.js.stream_info(stream)).config.num_replicas == 3, stream
        await media.close()
    finally:
        await rec.close()
    with EmbeddedNats(tmp_path / "alone") as alone:
        rec = await JetStreamRecorder.connect(alone.url, StreamSpec(name="ONE"), auth=alone.auth())
        try:
            assert (await rec.js.stream_info("ONE")).config.num_replicas == 1
        finally:
            await rec.close()


async def _append_until_acked(rec: JetStreamRecorder, subject: str, data: bytes, msg_id: str,
                              expected: int, deadline: float):
    """One message, re-sent with the same Nats-Msg-Id until acknowledged (what the writer's resync does)."""
    while True:
        try:
            return await rec.append(subject, data, msg_id=msg_id, expected_last_subject_seq=expected)
        except (EventLogError, nats.errors.Error, asyncio.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_acknowledged_writes_survive_the_stream_leader_being_killed(cluster):
    spec = StreamSpec(name="LEADER", subject_prefix="leader.j")
    rec = await JetStreamRecorder.connect(cluster.urls, spec, auth=cluster.auth(), timeout=2.0)
    subject, acked, last = spec.subject("a" * 32, "tick"), [], 0
    try:
        for i in range(20):
            ack = await _append_until_acked(rec, subject, b"m%d" % i, f"m{i}", last, time.monotonic() + 30)
            acked.append(ack.seq)
            last = ack.seq
        leader = node_named(cluster, (await rec.js.stream_info(spec.name)).cluster.leader)
        index = cluster.nodes.index(leader)
        leader.kill()
        try:
            for i in range(20, 40):   # the client reconnects to another node; a new leader is elected
                ack = await _append_until_acked(rec, subject, b"m%d" % i, f"m{i}", last, time.monotonic() + 60)
                assert not ack.duplicate or ack.seq == last
                acked.append(ack.seq)
                last = ack.seq
            info = await rec.js.stream_info(spec.name)
            assert info.cluster.leader != leader.settings.server_name
        finally:
            await cluster.restart_async(index)
        got = [m async for m in rec.read(1)]
        assert [m.seq for m in got] == sorted(set(acked)) and [m.data for m in got] == [b"m%d" % i for i in range(40)]
    finally:
        await rec.close()


async def test_a_client_of_the_seed_list_reads_through_any_node(cluster):
    spec = StreamSpec(name="ANYNODE", subject_prefix="any.j")
    rec = await JetStreamRecorder.connect(cluster.urls, spec, auth=cluster.auth())
    try:
        ack = await rec.append(spec.subject("b" * 32, "tick"), b"hello", msg_id="h1")
    finally:
        await rec.close()
    for node in cluster.nodes:   # each node alone: the stream is the cluster's, not one node's
        nc = await connect(node.url, cluster.auth(), name="reader")
        try:
            msg = await nc.jetstream().get_msg(spec.name, ack.seq, direct=True)
            assert msg.data == b"hello"
        finally:
            await nc.close()
