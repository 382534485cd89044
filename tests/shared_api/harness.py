"""A shared app over a real nats-server: principals, a token-bearing client and mutation bodies."""

from __future__ import annotations

import contextlib
import itertools
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from quart import Quart

from api.shared import attach_shared, token_sha256
from aotx.runtime import SharedRuntime
from eventlog import StreamSpec

BASE = "/aotx/v1/shared"
SCHEMA = "aotx.shared.mutation.v1"
ALL = {"shared_read", "shared_write", "shared_manage"}
_names = itertools.count(1)
TOKENS = {name: f"tok-{name}-{secrets.token_hex(16)}" for name in ("alice", "bob", "carol", "reader")}
PRINCIPALS = {token_sha256(TOKENS[n]): (n, ALL) for n in ("alice", "bob", "carol")}
PRINCIPALS[token_sha256(TOKENS["reader"])] = ("reader", {"shared_read"})


def fresh_spec(max_bytes: int | None = None) -> StreamSpec:
    n = next(_names)
    return StreamSpec(name=f"SHARED{n}", subject_prefix=f"s{n}.j", max_bytes=max_bytes)


@dataclass
class Party:
    """One principal talking to the app; tracks its own lineage and next sequence like a client."""

    name: str
    client: Any
    lineage: str = ""
    next_sequence: int = 1
    keys: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[self.name]}"}

    async def get(self, path: str, headers: dict[str, str] | None = None):
        resp = await self.client.get(BASE + path, headers={**self.headers, **(headers or {})})
        assert resp.headers["Cache-Control"] == "no-store"
        if resp.content_type.startswith("text/event-stream"):
            return resp.status_code, await resp.get_data(as_text=True)
        return resp.status_code, await resp.get_json()

    async def post_raw(self, path: str, raw: bytes):
        resp = await self.client.post(BASE + path, data=raw,
                                      headers={**self.headers, "Content-Type": "application/json"})
        assert resp.headers["Cache-Control"] == "no-store"
        return resp.status_code, await resp.get_json()

    async def post_blob(self, data: bytes, content_type: str | None, *, token: bool = True):
        headers = dict(self.headers) if token else {}
        if content_type is not None:
            headers["Content-Type"] = content_type
        resp = await self.client.post(BASE + "/media", data=data, headers=headers)
        assert resp.headers["Cache-Control"] == "no-store"
        return resp.status_code, await resp.get_json()

    def body(self, sequence: int | None = None, key: str | None = None, **fields: Any) -> dict[str, Any]:
        seq = self.next_sequence if sequence is None else sequence
        return {"schema": SCHEMA, "lineage": self.lineage, "operation_key": key or f"{next(self.keys):032x}",
                "sequence": str(seq), **fields}

    async def post(self, path: str, body: dict[str, Any]):
        status, got = await self.post_raw(path, json.dumps(body).encode())
        if status in (201, 202):  # 202: an input, admitted and saved, executing
            self.next_sequence += 1
        return status, got

    async def sync(self) -> dict[str, Any]:
        status, me = await self.get("/participant")
        assert status == 200, me
        self.lineage, self.next_sequence = me["lineage"], int(me["next_sequence"])
        return me


@contextlib.asynccontextmanager
async def shared_app(url: str, spec: StreamSpec, *, media_max_bytes: int | None = None, **runtime_kw: Any):
    runtime = SharedRuntime(None if "recorder" in runtime_kw else url, spec, progress=False, **runtime_kw)
    app = Quart("shared-test")
    attach_shared(app, runtime, PRINCIPALS, media_url=url,
                  **({} if media_max_bytes is None else {"media_max_bytes": media_max_bytes}))
    async with app.test_app() as test_app:
        client = test_app.test_client()
        parties = {name: Party(name, client) for name in TOKENS}
        yield runtime, parties, client


async def journal_bytes(runtime: SharedRuntime) -> list[tuple[int, bytes]]:
    return [(m.seq, m.data) async for m in runtime.recorder.read(1)]
