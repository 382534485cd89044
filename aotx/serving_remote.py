"""An HTTP worker's model service: prompts rendered here, generations run by the engine process over NATS.

RemoteModelService has what the wire surfaces use of aotx.serving.ModelService (model facts, prompt
building, token texts) and `submit_batch`, which api.runner.submit_all awaits: one NATS request for all
choices of a request; the engine answers accepted (then deltas stream to this worker's inbox, one message
per engine step for all of its generations) or refused (RequestRejected, nothing queued). No engine
answering: RequestRejected("engine_unavailable") before anything started; an engine that goes silent
for ENGINE_TIMEOUT (or a lost NATS connection) ends every open generation with a final error delta
(ENGINE_UNAVAILABLE). Wire format: aotx.engine_wire.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import msgpack
import nats.errors

from aotx.chat_types import ChatMessage, ToolSpec
from aotx.engine import ENGINE_STOPPED, RequestRejected, SamplingParams
from aotx.engine.request import DeltaStream
from aotx.engine.types import Delta
from aotx.sampling_defaults import SamplingDefaults, defaults_for
from aotx.engine_wire import (
    heartbeat,
    ENGINE_TIMEOUT,
    ENGINE_UNAVAILABLE,
    HEARTBEAT,
    WIRE_VERSION,
    alive_subject,
    ctl_subject,
    gen_subject,
    params_to_wire,
    step_from_wire,
    worker_inbox,
)
from aotx.prompt_work import PromptWork
from aotx.route_metrics import RouteMetrics
from eventlog import NatsAuth, OutageLog, close_connection, connect, flush_subscriptions

log = logging.getLogger("aotx.serving_remote")
SUBMIT_TIMEOUT = 10.0   # seconds to wait for the engine to accept or refuse


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


class RemoteHandle(DeltaStream):
    """RequestHandle's caller side for a generation that runs in the engine process."""

    def __init__(self, client: EngineClient, rid: int) -> None:
        self._client, self.rid = client, rid
        self.request_id = ""
        self.prompt_tokens = 0
        self.max_tokens = 0
        self.finish_reason: str | None = None
        self._open_box()
        self._done = False
        self._cancel_sent = False


    def put(self, delta: Delta) -> None:
        self._push(delta)

    def cancel(self) -> None:
        if self._cancel_sent or self._done:
            return
        self._cancel_sent = True
        self._client.cancel(self.rid)


class EngineClient:
    """One worker's NATS link to the engine process: submit, deltas, cancellations, heartbeats."""

    def __init__(self, nats_url: str, name: str, *, auth: NatsAuth | None = None, worker: str | None = None) -> None:
        self.nats_url, self.name, self.auth = nats_url, name, auth
        self.worker = worker or secrets.token_hex(6)
        self.inbox = worker_inbox(name, self.worker)
        self._nc = None
        self._rids = itertools.count(1)
        self._open: dict[int, RemoteHandle] = {}
        self._cancels: list[int] = []
        self._last_alive = time.monotonic()
        self._tasks: list[asyncio.Task] = []
        self.messages_in = 0   # delta messages heard (test and bench hook)

    async def start(self) -> EngineClient:
        outage = OutageLog(log, f"aotx-http-worker-{self.worker}", self.nats_url)   # one line per outage

        async def disconnected() -> None:
            self._fail_open("the NATS connection to the engine process was lost")

        self._nc = await connect(self.nats_url, self.auth, name=f"aotx-http-worker-{self.worker}",
                                 error_cb=outage.error, reconnected_cb=outage.reconnected,
                                 disconnected_cb=disconnected, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        await self._nc.subscribe(self.inbox, cb=self._on_deltas, pending_msgs_limit=-1, pending_bytes_limit=-1)
        await self._nc.subscribe(alive_subject(self.name), cb=self._on_alive)
        await flush_subscriptions(self._nc)   # the server has the SUBs (not flush() alone)
        self._last_alive = time.monotonic()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._heartbeat()), loop.create_task(self._watch())]
        return self

    async def stop(self) -> None:
        """Idempotent. What is still open ends with ENGINE_STOPPED (the drain's native 503)."""
        if self._nc is None:
            return
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._nc is not None and self._nc.is_connected:
            try:
                await self._nc.publish(ctl_subject(self.name), _pack({"op": "bye", "w": self.worker}))
            except nats.errors.Error as exc:
                log.warning("engine goodbye not sent: %s", exc)
        self._fail_open("the HTTP worker is stopping", error=ENGINE_STOPPED)
        await close_connection(self._nc, name=f"aotx-http-worker-{self.worker}")
        self._nc = None

    @property
    def open_generations(self) -> int:
        return len(self._open)

    async def submit(self, prompts: Sequence[list[int]], params: Sequence[SamplingParams], *, surface: str,
                     lane: str) -> list[RemoteHandle]:
        handles = [RemoteHandle(self, next(self._rids)) for _ in prompts]
        for h in handles:   # before the request: deltas may arrive before the reply is read
            self._open[h.rid] = h
        req = {"v": WIRE_VERSION, "w": self.worker, "inbox": self.inbox, "surface": surface, "lane": lane,
               "items": [[h.rid, list(p), params_to_wire(sp)] for h, p, sp in zip(handles, prompts, params)]}
        try:
            reply = await self._request(req)
        except BaseException:
            for h in handles:
                self._open.pop(h.rid, None)
            # cancelled while the submit was on the way (the client left): the engine may have taken them
            self._cancel_rids([h.rid for h in handles])
            raise
        if "rejected" in reply:
            for h in handles:
                self._open.pop(h.rid, None)
            raise RequestRejected(str(reply["rejected"]), str(reply.get("message") or ""))
        for h, (request_id, prompt_tokens, max_tokens) in zip(handles, reply["ok"]):
            h.request_id, h.prompt_tokens, h.max_tokens = request_id, prompt_tokens, max_tokens
        return handles

    async def _request(self, req: dict) -> dict:
        if self._nc is None or not self._nc.is_connected:
            raise RequestRejected("engine_unavailable", "the HTTP worker is not connected to the engine process")
        try:
            msg = await self._nc.request(gen_subject(self.name), _pack(req), timeout=SUBMIT_TIMEOUT)
        except nats.errors.NoRespondersError:
            raise RequestRejected("engine_unavailable", "no engine process answers; retry later") from None
        except nats.errors.TimeoutError:
            raise RequestRejected("engine_unavailable",
                                  f"the engine process did not answer within {SUBMIT_TIMEOUT:g} s") from None
        except nats.errors.MaxPayloadError:
            raise RequestRejected("context_length_exceeded", "the prompt exceeds the NATS payload limit") from None
        except nats.errors.Error as exc:
            raise RequestRejected("engine_unavailable",
                                  f"the engine process could not be reached ({type(exc).__name__})") from None
        return msgpack.unpackb(msg.data, raw=False)

    def cancel(self, rid: int) -> None:
        """Sent on the next loop turn, together with every other cancellation of this turn."""
        if rid in self._open:
            self._cancel_rids([rid])

    def _cancel_rids(self, rids: list[int]) -> None:
        if not self._cancels:
            asyncio.get_running_loop().create_task(self._send_cancels())
        self._cancels += rids

    async def _send_cancels(self) -> None:
        rids, self._cancels = self._cancels, []
        if self._nc is None:
            return
        try:
            await self._nc.publish(ctl_subject(self.name), _pack({"op": "cancel", "w": self.worker, "rids": rids}))
        except nats.errors.Error as exc:   # the engine cancels them itself when it stops hearing us
            log.warning("cancellation of %d generation(s) not sent: %s", len(rids), exc)

    async def _on_deltas(self, msg) -> None:
        self.messages_in += 1
        for rid, delta in step_from_wire(msgpack.unpackb(msg.data, raw=False, use_list=False)):
            handle = self._open.get(rid)
            if handle is None:
                continue
            if delta.finish_reason is not None:
                del self._open[rid]
            handle.put(delta)

    async def _on_alive(self, msg) -> None:
        self._last_alive = time.monotonic()

    def _fail_open(self, why: str, *, error: str | None = None) -> None:
        opened, self._open = self._open, {}
        if opened:
            log.warning("%d open generation(s) end: %s", len(opened), why)
        for handle in opened.values():
            handle.put(Delta("", finish_reason="error", error=error or f"{ENGINE_UNAVAILABLE}: {why}"))

    async def _heartbeat(self) -> None:
        await heartbeat(self._nc, ctl_subject(self.name), _pack({"op": "hb", "w": self.worker}), "worker")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT / 2)
            if self._open and time.monotonic() - self._last_alive > ENGINE_TIMEOUT:
                self._fail_open(f"the engine process was not heard for {ENGINE_TIMEOUT:g} s")


class RemoteModelService:
    """What the wire surfaces use of ModelService, in an HTTP worker (no weights, no engine)."""

    def __init__(self, text_side, client: EngineClient, *, model_id: str, backend_name: str, created: int,
                 context_tokens: int, default_max_tokens: int,
                 sampling_defaults: SamplingDefaults | None = None) -> None:
        self.bundle = text_side
        # the engine process's per-model defaults (its --default-temperature / --default-top-p)
        self.sampling_defaults = sampling_defaults or defaults_for(model_id)
        self.client = client
        self.model_id, self.backend_name, self.created = model_id, backend_name, int(created)
        self.context_length = int(text_side.config.context_length)
        self.default_max_tokens = int(default_max_tokens)
        self._context_tokens = int(context_tokens)
        self.routes = RouteMetrics()
        self._tokenizer = text_side.tokenizer
        self._constraints = None
        self.prompts = PromptWork(text_side.tokenizer, text_side.chat_template)

    def start(self) -> None:
        """The client is started before serving (ops.http_worker)."""

    async def stop(self) -> None:
        await self.client.stop()
        self.prompts.close()

    @property
    def context_tokens(self) -> int:
        return self._context_tokens

    def busy(self) -> bool:
        return self.client.open_generations > 0

    def known_model(self, name: str) -> bool:
        return name == self.model_id

    async def chat_prompt_ids(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                              tool_choice: str | None = None, *, primer: str = "", prefill: str = "",
                              limit: int | None = None) -> list[int]:
        return await self.prompts.chat(messages, tools, tool_choice, primer=primer, prefill=prefill, limit=limit)

    async def text_prompt_ids(self, text: str, *, limit: int | None = None) -> list[int]:
        return await self.prompts.text(text, limit=limit)

    @property
    def vocab_size(self) -> int:
        return int(self.bundle.config.vocab_size)

    @property
    def constraints(self):
        """Structured outputs: this worker compiles a request's constraint (a bad schema is refused
        here, at parse time); the engine process receives its grammar (aotx.engine_wire)."""
        if self._constraints is None:
            from aotx.structured import ConstraintCompiler
            self._constraints = ConstraintCompiler(self._tokenizer)
        return self._constraints

    def token_bytes(self, token_id: int) -> bytes:
        return self._tokenizer.token_bytes(token_id)

    def token_text(self, token_id: int) -> str:
        return self._tokenizer.token_text(token_id)

    async def submit_batch(self, prompts: Sequence[list[int]], params: Sequence[SamplingParams], *, surface: str,
                           lane: str) -> list[RemoteHandle]:
        handles = await self.client.submit(prompts, params, surface=surface, lane=lane)
        self.routes.record(surface, lane)
        return handles
