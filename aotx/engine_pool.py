"""A gateway's engines: every engine the boots of one runtime serve (`aotx boot` with a model), found by
their alive beats, each request sent to the one with the most free capacity (issue 15 part 3).

An engine served for gateways is named `<runtime>.<boot>` and beats on `aotx.eng.<runtime>.<boot>.alive`
with its model's facts and its load (aotx.engine_wire: `engine_facts`, `pool_alive_subject`); the pool
hears them all on one wildcard subscription. EnginePool has what RemoteModelService needs of an
EngineClient (`submit`, `open_generations`, `stop`), so a gateway's model surfaces are an HTTP worker's
with a pool in place of the one engine client.

Which engine: the lowest (its active generations at its last beat + those this pool sent it since) ÷ its
capacity (the batch it runs), among the engines heard within ENGINE_TIMEOUT that serve the pool's model;
ties go to the engine heard first. An engine that answers `engine_unavailable` (gone, not answering) is
passed over until it beats again and the request goes to the next; any other refusal (a prompt too long,
a full engine's 429) is the request's answer. No engine: `engine_unavailable` (503 on every surface).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import msgpack

from aotx.engine import RequestRejected, SamplingParams
from aotx.engine_wire import ENGINE_TIMEOUT, pool_alive_subject
from aotx.serving_remote import EngineClient, RemoteHandle
from eventlog import NatsAuth, OutageLog, close_connection, connect, flush_subscriptions

log = logging.getLogger("aotx.engine_pool")


class PooledEngine:
    __slots__ = ("name", "facts", "active", "capacity", "seen", "sent", "order", "client")

    def __init__(self, name: str, order: int) -> None:
        self.name, self.order = name, order
        self.facts: dict[str, Any] = {}
        self.active, self.capacity, self.seen, self.sent = 0, 0, 0.0, 0
        self.client: EngineClient | None = None

    def score(self) -> float:
        return (self.active + self.sent) / max(self.capacity, 1)


class EnginePool:
    def __init__(self, nats_url: str, runtime: str, *, auth: NatsAuth | None = None, worker: str = "gateway") -> None:
        self.nats_url, self.runtime, self.auth, self.worker = nats_url, runtime, auth, worker
        self.engines: dict[str, PooledEngine] = {}
        self.model: str | None = None      # the model this pool serves: the first engine's
        self._nc = None
        self._first = asyncio.Event()

    async def start(self) -> EnginePool:
        outage = OutageLog(log, f"aotx-engine-pool-{self.runtime}", self.nats_url)
        self._nc = await connect(self.nats_url, self.auth, name=f"aotx-engine-pool-{self.runtime}",
                                 error_cb=outage.error, reconnected_cb=outage.reconnected,
                                 max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        await self._nc.subscribe(pool_alive_subject(self.runtime), cb=self._on_alive)
        await flush_subscriptions(self._nc)
        return self

    async def first_engine(self, timeout: float) -> dict[str, Any]:
        """The facts of the first engine heard (within `timeout` seconds, else TimeoutError)."""
        await asyncio.wait_for(self._first.wait(), timeout)
        return next(e.facts for e in self.engines.values() if e.facts.get("model") == self.model)

    async def _on_alive(self, msg) -> None:
        name = ".".join(msg.subject.split(".")[2:-1])   # aotx.eng.<runtime>.<boot>.alive
        try:
            beat = msgpack.unpackb(msg.data, raw=False)
            load = beat["load"]
            active, capacity = int(load["active"]), int(load["capacity"])
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            log.warning("malformed alive beat from engine %s: %s", name, exc)
            return
        engine = self.engines.get(name)
        if engine is None:
            engine = self.engines[name] = PooledEngine(name, len(self.engines))
            log.info("engine %s joined the pool of runtime %s", name, self.runtime)
        engine.facts = {k: v for k, v in beat.items() if k not in ("v", "load")}
        engine.active, engine.capacity, engine.seen, engine.sent = active, capacity, time.monotonic(), 0
        if self.model is None:
            self.model = engine.facts.get("model")
        self._first.set()

    def ranked(self) -> list[PooledEngine]:
        """The engines a request may go to, the best first."""
        now = time.monotonic()
        live = [e for e in self.engines.values()
                if now - e.seen <= ENGINE_TIMEOUT and e.facts.get("model") == self.model]
        return sorted(live, key=lambda e: (e.score(), e.order))

    async def _client(self, engine: PooledEngine) -> EngineClient:
        if engine.client is None:
            engine.client = await EngineClient(self.nats_url, engine.name, auth=self.auth,
                                               worker=f"{self.worker}-{id(self):x}").start()
        return engine.client

    async def submit(self, prompts: Sequence[list[int]], params: Sequence[SamplingParams], *, surface: str,
                     lane: str) -> list[RemoteHandle]:
        last: RequestRejected | None = None
        for engine in self.ranked():
            client = await self._client(engine)
            try:
                handles = await client.submit(prompts, params, surface=surface, lane=lane)
            except RequestRejected as exc:
                if exc.code != "engine_unavailable":
                    raise
                engine.seen, last = 0.0, exc   # passed over until its next beat
                log.warning("engine %s did not take a request (%s); trying the next", engine.name, exc.message)
                continue
            engine.sent += len(prompts)
            return handles
        why = f" (the last: {last.message})" if last is not None else ""
        raise RequestRejected("engine_unavailable",
                              f"no engine of runtime {self.runtime} is available{why}; retry later")

    @property
    def open_generations(self) -> int:
        return sum(e.client.open_generations for e in self.engines.values() if e.client is not None)

    async def stop(self) -> None:
        clients = [e.client for e in self.engines.values() if e.client is not None]
        await asyncio.gather(*(c.stop() for c in clients))
        if self._nc is not None:
            await close_connection(self._nc, name=f"aotx-engine-pool-{self.runtime}")
            self._nc = None




def pooled_model_service(text_side, pool: EnginePool, facts: dict[str, Any]):
    """A gateway's model service: the model surfaces' side (prompts rendered here, with the text side of the
    same model) over `pool`, with the model facts its engines announce (EnginePool.first_engine)."""
    from aotx.sampling_defaults import SamplingDefaults
    from aotx.serving_remote import RemoteModelService

    return RemoteModelService(text_side, pool, model_id=facts["model"], backend_name=facts["backend"],
                              created=facts["created"], context_tokens=facts["context_tokens"],
                              default_max_tokens=facts["default_max_tokens"],
                              sampling_defaults=SamplingDefaults(**facts["sampling_defaults"]))
