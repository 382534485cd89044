"""The journal stream: its settings and idempotent creation."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType, StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

SUBJECT_PREFIX = "aotx.j"
_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


def journal_subject(lineage: str, kind: str, prefix: str = SUBJECT_PREFIX) -> str:
    """`aotx.j.<lineage>.<kind>`; both tokens must be plain (no dots, wildcards or spaces)."""
    for name, token in (("lineage", lineage), ("kind", kind)):
        if not _TOKEN.match(token):
            raise ValueError(f"invalid {name} subject token {token!r}")
    return f"{prefix}.{lineage}.{kind}"


@dataclass(frozen=True)
class StreamSpec:
    """Settings of the one journal stream. max_bytes=None means no cap (-1 on the server).
    replicas=None: three on a cluster (fewer where the cluster has fewer servers), one otherwise
    (replicas_for)."""

    name: str = "AOTX_JOURNAL"
    subject_prefix: str = SUBJECT_PREFIX
    max_bytes: int | None = None
    duplicate_window_s: float = 120.0
    max_msg_size: int | None = None
    replicas: int | None = None
    allow_atomic: bool = True   # atomic batch publish (nats-server ≥ 2.12); set on an existing stream too

    @property
    def subjects(self) -> list[str]:
        return [f"{self.subject_prefix}.>"]

    def subject(self, lineage: str, kind: str) -> str:
        return journal_subject(lineage, kind, self.subject_prefix)

    def config(self, replicas: int = 1) -> StreamConfig:
        """The stream's config; `replicas` where the spec leaves them to the server (None)."""
        return StreamConfig(
            name=self.name,
            subjects=self.subjects,
            storage=StorageType.FILE,
            discard=DiscardPolicy.NEW,
            max_bytes=-1 if self.max_bytes is None else self.max_bytes,
            max_msg_size=-1 if self.max_msg_size is None else self.max_msg_size,
            duplicate_window=self.duplicate_window_s,
            num_replicas=self.replicas if self.replicas is not None else replicas,
            allow_direct=True,
            allow_atomic=self.allow_atomic,
        )


REPLICAS_ON_A_CLUSTER = 3
LEADER_WAIT = 10.0   # seconds ensure_stream waits for a replicated stream's leader


def replicas_for(nc, wanted: int | None = None) -> int:
    """The replicas of a stream or bucket we create on `nc`'s server: `wanted` where given, else
    three on a cluster (as many as it has servers, when fewer), one on a single server."""
    if wanted is not None:
        return wanted
    return max(1, min(REPLICAS_ON_A_CLUSTER, int(getattr(nc, "cluster_size", 1))))


async def ensure_stream(js: JetStreamContext, spec: StreamSpec, replicas: int = 1) -> StreamInfo:
    """Create the stream, or bring an existing one's settings to `spec` (same name, same storage);
    `replicas` where the spec leaves them open (replicas_for)."""
    config = spec.config(replicas)
    try:
        await js.stream_info(spec.name)
    except NotFoundError:
        return await _led(js, spec.name, await js.add_stream(config))
    return await _led(js, spec.name, await js.update_stream(config))


async def _led(js: JetStreamContext, name: str, info: StreamInfo, timeout: float = LEADER_WAIT) -> StreamInfo:
    """`info` once a replicated stream has a leader (a stream just created on a cluster elects one
    first, and a publish before that finds no responder: the first append of a fresh journal failed so);
    at most `timeout` seconds, then as it is (the appends then meet JournalUnavailable as before)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while info.cluster is not None and not info.cluster.leader and loop.time() < deadline:
        await asyncio.sleep(0.02)
        info = await js.stream_info(name)
    return info
