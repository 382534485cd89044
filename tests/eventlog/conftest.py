"""A real nats-server for the eventlog tests, and recorder factories for the contract suite."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from eventlog import EmbeddedNats, JetStreamRecorder, MemoryRecorder, StreamSpec

_names = itertools.count(1)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory):
    with EmbeddedNats(tmp_path_factory.mktemp("nats")) as server:
        yield server


@dataclass
class Opened:
    recorder: object
    spec: StreamSpec

    def subject(self, lineage: str, kind: str = "t") -> str:
        return self.spec.subject(lineage, kind)


@pytest.fixture(params=["memory", "jetstream"])
async def open_recorder(request):
    """open_recorder(max_bytes=None) -> Opened: a fresh recorder on its own stream and subjects."""
    made: list[Opened] = []

    async def open_(max_bytes: int | None = None) -> Opened:
        n = next(_names)
        spec = StreamSpec(name=f"T{n}", subject_prefix=f"t{n}.j", max_bytes=max_bytes)
        if request.param == "memory":
            rec = MemoryRecorder(spec.name, max_bytes=max_bytes)
        else:
            rec = await JetStreamRecorder.connect(request.getfixturevalue("nats_server").client_url(), spec)
        made.append(Opened(rec, spec))
        return made[-1]

    yield open_
    for opened in made:
        await opened.recorder.close()
