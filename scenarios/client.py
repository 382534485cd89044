"""Clients of /aotx/v1/shared for scenarios: one transport interface, over real HTTP or a Quart test client."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

BASE = "/aotx/v1/shared"
SCHEMA = "aotx.shared.mutation.v1"


class TransportError(RuntimeError):
    """No HTTP answer at all (connection refused or reset, timeout): the outcome is unknown."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


class Transport(Protocol):
    async def request(self, method: str, path: str, token: str, raw: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Answer: ...

    async def close(self) -> None: ...


class HttpTransport:
    """Real HTTP (httpx) against a running gateway."""

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        import httpx
        self._httpx = httpx
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/") + BASE, timeout=timeout,
                                      limits=httpx.Limits(max_connections=64, max_keepalive_connections=64))

    async def request(self, method: str, path: str, token: str, raw: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Answer:
        headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        if raw is not None:
            headers["Content-Type"] = "application/json"
        try:
            r = await self.http.request(method, path, content=raw, headers=headers)
        except self._httpx.HTTPError as exc:
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            body = r.text  # a server-sent event stream, read to its end
        else:
            try:
                body = r.json()
            except ValueError:
                body = r.text
        return Answer(r.status_code, body, dict(r.headers))

    async def close(self) -> None:
        await self.http.aclose()


class QuartTransport:
    """In process: a Quart test client (no sockets)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def request(self, method: str, path: str, token: str, raw: bytes | None = None,
                      headers: dict[str, str] | None = None) -> Answer:
        headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        if raw is not None:
            headers["Content-Type"] = "application/json"
        resp = await self.client.open(BASE + path, method=method, data=raw, headers=headers)
        if (resp.mimetype or "").startswith("text/event-stream"):
            return Answer(resp.status_code, await resp.get_data(as_text=True), dict(resp.headers))
        return Answer(resp.status_code, await resp.get_json(), dict(resp.headers))

    async def close(self) -> None:
        pass


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Server-sent events of a finished stream: [{"event", "id"?, "data" (JSON)}]; comments left out."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        event: dict[str, Any] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            event[name] = json.loads(value) if name == "data" else value
        out.append(event)
    return out


def new_key() -> str:
    """A fresh nonzero operation key (random, so runs against a reused journal never collide)."""
    while True:
        key = secrets.token_hex(16)
        if int(key, 16):
            return key


@dataclass
class Party:
    """One principal: its token, and its lineage / participant id / next sequence as a client keeps them."""

    name: str
    token: str
    transport: Transport
    lineage: str = ""
    pid: str | None = None
    next_sequence: int = 1
    retry_floor: int = 1

    def body(self, fields: dict[str, Any], *, key: str, sequence: int) -> bytes:
        return json.dumps({"schema": SCHEMA, "lineage": self.lineage, "operation_key": key,
                           "sequence": str(sequence), **fields}, separators=(",", ":")).encode()

    async def get(self, path: str, headers: dict[str, str] | None = None) -> Answer:
        return await self.transport.request("GET", path, self.token, headers=headers)

    async def post(self, path: str, raw: bytes) -> Answer:
        return await self.transport.request("POST", path, self.token, raw)

    async def sync(self) -> dict[str, Any]:
        a = await self.get("/participant")
        if a.status != 200:
            raise AssertionError(f"{self.name}: GET /participant answered {a.status}: {a.body}")
        me = a.body
        self.lineage, self.pid = me["lineage"], me["participant"]
        self.next_sequence, self.retry_floor = int(me["next_sequence"]), int(me["retry_floor"])
        return me
