"""The engine process's side of `aotx serve --http-workers N`: generations for HTTP workers over NATS.

Workers submit on `gen` (request/reply: accepted or refused before anything runs); each accepted
request's handle is redirected (RequestHandle.redirect) into its worker's outbox (a list: one append a
token of its wire item, aotx.engine_wire.item_to_wire), and one flush per event-loop turn packs and
publishes each non-empty outbox in one go: the engine hands a whole step's deltas to the loop in
one callback, so NATS carries at most one message per worker per engine step, and a worker with nothing
new costs nothing.
A worker's cancellations and heartbeats come on `ctl`; one silent for WORKER_TIMEOUT (killed, hung,
cut off) has its generations cancelled. The engine announces itself on `alive` every HEARTBEAT.
Wire format and subjects: aotx.engine_wire.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

import msgpack
import nats.errors

from aotx.engine import RequestRejected
from aotx.engine_wire import (
    heartbeat,
    HEARTBEAT,
    WIRE_VERSION,
    WORKER_TIMEOUT,
    alive_subject,
    ctl_subject,
    gen_subject,
    params_from_wire,
    item_to_wire,
    split_to_fit,
)
from eventlog import NatsAuth, OutageLog, close_connection, connect, flush_subscriptions

log = logging.getLogger("aotx.engine_service")
EARLY_CANCELS = 4096   # cancels remembered for generations not seen yet


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


class _Outbox:
    """One worker's deltas since the last flush: their wire items (aotx.engine_wire.item_to_wire), in the
    engine's order, and the rids among them that finished."""
    __slots__ = ("worker", "inbox", "items", "ended")

    def __init__(self, worker: str, inbox: str) -> None:
        self.worker, self.inbox, self.items, self.ended = worker, inbox, [], []


class EngineService:
    """Serves `service` (aotx.serving.ModelService) to HTTP workers on NATS until stop()."""

    def __init__(self, service, nats_url: str, name: str, *, auth: NatsAuth | None = None,
                 worker_timeout: float = WORKER_TIMEOUT, facts: dict | None = None) -> None:
        """`facts` (aotx.engine_wire.engine_facts): the alive beat carries them and the engine's load, for
        gateways' engine pools (aotx.engine_pool); without, the beat is the bare liveness workers need."""
        self.service, self.nats_url, self.name, self.auth = service, nats_url, name, auth
        self.facts = facts
        self.worker_timeout = worker_timeout
        self._nc = None
        self._gens: dict[tuple[str, int], Any] = {}        # (worker, rid) -> RequestHandle
        self._seen: dict[str, float] = {}                  # worker -> last heard (monotonic)
        self._outboxes: dict[str, _Outbox] = {}            # worker inbox -> its outbox
        self._dirty: list[_Outbox] = []                    # outboxes with deltas since the last flush
        self._flushing: asyncio.Task | None = None
        # cancels that came before their generation (a worker gave up while its submit was on the way):
        # applied when it arrives; the oldest forgotten past EARLY_CANCELS
        self._early: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._tasks: list[asyncio.Task] = []
        self._compiling: set[asyncio.Task] = set()        # requests whose constraint compiles in a thread
        self.messages_out = 0                              # delta messages published (test and bench hook)

    @property
    def generations(self) -> int:
        return len(self._gens)

    async def start(self) -> EngineService:
        outage = OutageLog(log, f"aotx-engine-{self.name}", self.nats_url)   # one line per outage
        self._nc = await connect(self.nats_url, self.auth, name=f"aotx-engine-{self.name}", error_cb=outage.error,
                                 reconnected_cb=outage.reconnected, max_reconnect_attempts=-1,
                                 reconnect_time_wait=0.2)
        await self._nc.subscribe(gen_subject(self.name), cb=self._on_gen)
        await self._nc.subscribe(ctl_subject(self.name), cb=self._on_ctl)
        await flush_subscriptions(self._nc)   # a worker's first submit finds us (never `no responders`)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeat()), loop.create_task(self._sweep())]
        return self

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._compiling]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for handle in list(self._gens.values()):
            handle.cancel()
        await close_connection(self._nc, name=f"aotx-engine-{self.name}")
        self._nc = None

    # -- requests -------------------------------------------------------------------------------
    async def _on_gen(self, msg) -> None:
        try:
            req = msgpack.unpackb(msg.data, raw=False)
            grammars = self._uncompiled(req)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, msgpack.UnpackException) as exc:
            await self._respond(msg, {"rejected": "invalid_request", "message": f"malformed generate request: {exc}"})
            return
        if grammars:    # compiled in a thread, in a task of its own: the next request is not held behind it
            task = asyncio.get_running_loop().create_task(self._compile_then_submit(msg, req, grammars))
            self._compiling.add(task)
            task.add_done_callback(self._compiling.discard)
            return
        await self._submit_and_reply(msg, req)

    def _uncompiled(self, req) -> list[tuple[str, str]]:
        """The constraint grammars of a request that this process has not compiled yet: a large one
        takes milliseconds to seconds, so never on this loop."""
        if not isinstance(req, dict) or req.get("v") != WIRE_VERSION:
            return []
        out = []
        for _, _, params in req["items"]:
            c = params.get("constraint")
            if isinstance(c, dict) and not self.service.constraints.cached_grammar(str(c["grammar"])):
                out.append((str(c["kind"]), str(c["grammar"])))
        return out

    async def _compile_then_submit(self, msg, req: dict, grammars: list[tuple[str, str]]) -> None:
        try:
            for kind, grammar in grammars:   # cached by digest: _submit then finds them compiled
                await asyncio.to_thread(self.service.constraints.from_grammar, kind, grammar)
        except ValueError as exc:           # ConstraintError: the same answer _submit would give
            await self._respond(msg, {"rejected": "invalid_request", "message": f"malformed generate request: {exc}"})
            return
        await self._submit_and_reply(msg, req)

    async def _submit_and_reply(self, msg, req) -> None:
        try:
            reply = self._submit(req)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            reply = {"rejected": "invalid_request", "message": f"malformed generate request: {exc}"}
        await self._respond(msg, reply)

    @staticmethod
    async def _respond(msg, reply: dict) -> None:
        try:
            await msg.respond(_pack(reply))
        except nats.errors.Error as exc:   # the worker will time out and answer 503
            log.warning("generate reply not sent: %s", exc)

    def _submit(self, req: dict) -> dict:
        if req.get("v") != WIRE_VERSION:
            return {"rejected": "invalid_request", "message": f"engine requests must be version {WIRE_VERSION}"}
        worker, inbox, items = str(req["w"]), str(req["inbox"]), req["items"]
        self._seen[worker] = time.monotonic()
        handles = []
        try:
            for _, prompt, params in items:
                handles.append(self.service.submit(list(prompt), params_from_wire(params, _compiler(self.service, params)),
                                                   surface=str(req["surface"]), lane=str(req["lane"])))
        except RequestRejected as exc:
            for handle in handles:
                handle.cancel()
            return {"rejected": exc.code, "message": exc.message}
        except (ValueError, TypeError):
            for handle in handles:
                handle.cancel()
            raise
        out = []
        outbox = self._outboxes.get(inbox)
        if outbox is None:
            outbox = self._outboxes[inbox] = _Outbox(worker, inbox)
        for (rid, _, _), handle in zip(items, handles):
            key = (worker, int(rid))
            self._gens[key] = handle
            handle.redirect(*self._sink(outbox, key[1], handle.prompt_tokens))
            out.append([handle.request_id, handle.prompt_tokens, handle.max_tokens])
            if self._early.pop(key, 0) is None:   # its worker cancelled it before it got here
                handle.cancel()
        return {"ok": out}

    def _sink(self, outbox: _Outbox, rid: int, prompt_tokens: int):
        """The delta sink of one generation: on the loop, one call per delta, every delta of one engine
        step in one loop callback; the flush after that callback sends them. A plain token's wire item is
        made here, inline (item_to_wire's first case); with the plain sink (RequestHandle.redirect's
        `plain`) for the engine's quiet tokens, from their parts."""
        items, dirty = outbox.items, self._dirty

        def sink(d) -> None:
            if not items:
                dirty.append(outbox)
                if self._flushing is None:
                    self._flushing = asyncio.get_running_loop().create_task(self._flush())
            if (d.finish_reason is None and d.stop_sequence is None and d.error is None and not d.logprobs
                    and not d.prompt_logprobs):
                items.append((rid, d.text, d.token_ids, d.prompt_tokens, d.completion_tokens))
                return
            items.append(item_to_wire(rid, d))
            if d.finish_reason is not None:
                outbox.ended.append(rid)

        def plain(text: str, token_ids: tuple[int, ...], completion_tokens: int) -> None:
            """A plain token given by its parts (RequestHandle.put_plain): its wire item, no Delta."""
            if not items:
                dirty.append(outbox)
                if self._flushing is None:
                    self._flushing = asyncio.get_running_loop().create_task(self._flush())
            items.append((rid, text, token_ids, prompt_tokens, completion_tokens))
        return sink, plain

    async def _flush(self) -> None:
        dirty, self._flushing = self._dirty.copy(), None   # the sinks hold this list: emptied, never replaced
        self._dirty.clear()
        steps = []
        for outbox in dirty:   # taken before the first await: the next step's deltas go to the next flush
            items = outbox.items.copy()
            outbox.items.clear()
            if outbox.ended:
                for rid in outbox.ended:
                    self._gens.pop((outbox.worker, rid), None)
                outbox.ended.clear()
            steps.append((outbox.inbox, items))
        if self._nc is None:
            return
        for inbox, items in steps:
            for data in split_to_fit(items, _pack, self._nc.max_payload):
                try:
                    await self._nc.publish(inbox, data)
                    self.messages_out += 1
                except nats.errors.Error as exc:   # the worker's watchdog ends what it no longer hears
                    log.warning("deltas for %s not sent: %s", inbox, exc)

    # -- control --------------------------------------------------------------------------------
    async def _on_ctl(self, msg) -> None:
        try:
            m = msgpack.unpackb(msg.data, raw=False)
            op, worker = m["op"], str(m["w"])
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            log.warning("malformed engine control message: %s", exc)
            return
        self._seen[worker] = time.monotonic()
        if op == "cancel":
            for rid in m.get("rids") or ():
                key = (worker, int(rid))
                handle = self._gens.get(key)
                if handle is not None:
                    handle.cancel()
                else:   # not here (yet): its submit may still be on the way
                    self._early[key] = None
                    while len(self._early) > EARLY_CANCELS:
                        self._early.popitem(last=False)
        elif op == "bye":
            self._cancel_worker(worker)
            self._seen.pop(worker, None)
            self._forget_outboxes(worker)

    def _cancel_worker(self, worker: str) -> int:
        keys = [k for k in self._gens if k[0] == worker]
        for key in keys:
            self._gens[key].cancel()
        return len(keys)

    def _forget_outboxes(self, worker: str) -> None:
        """A gone worker's outbox leaves the table (its generations' sinks still hold it for their last deltas)."""
        for inbox in [i for i, o in self._outboxes.items() if o.worker == worker]:
            del self._outboxes[inbox]

    async def _heartbeat(self) -> None:
        if self.facts is None:
            await heartbeat(self._nc, alive_subject(self.name), _pack({"v": WIRE_VERSION}), "engine")
        else:
            await heartbeat(self._nc, alive_subject(self.name), self._beat, "engine")

    def _beat(self) -> bytes:
        return _pack({"v": WIRE_VERSION, **self.facts, "load": self.load()})

    def load(self) -> dict[str, int]:
        """{"active": generations running or waiting, "capacity": the batch it runs at most}."""
        engine = getattr(self.service, "engine", None)
        if engine is None:   # a service without an engine of its own (a bench's scripted one)
            return {"active": len(self._gens), "capacity": 0}
        stats = engine.stats()
        return {"active": int(stats.running + stats.queue_depth), "capacity": int(engine.scheduler.max_batch)}

    async def _sweep(self) -> None:
        """Cancel the generations of workers not heard for worker_timeout (a killed worker)."""
        while True:
            await asyncio.sleep(HEARTBEAT / 2)
            now = time.monotonic()
            for worker in {k[0] for k in self._gens}:
                if now - self._seen.get(worker, now) > self.worker_timeout:
                    n = self._cancel_worker(worker)
                    self._seen.pop(worker, None)
                    self._forget_outboxes(worker)
                    log.warning("http worker %s silent for %.1f s: %d generation(s) cancelled",
                                worker, self.worker_timeout, n)


def _compiler(service, params: dict):
    """The service's constraint compiler, only where the request carries a constraint (llguidance
    is loaded by the first request that needs it)."""
    return service.constraints if params.get("constraint") is not None else None
