"""The few calls of /aotx/v1/shared the terminal client makes, with the mutation envelope filled in:
this principal's lineage, a fresh random operation key per mutation (never one reused by another client
of the same lineage) and the next sequence, read from GET /participant and read again after a 409 that
says another client of this principal took it."""
from __future__ import annotations

import secrets
from typing import Any

import httpx

BASE = "/aotx/v1/shared"
SCHEMA = "aotx.shared.mutation.v1"


class SharedError(Exception):
    """A refusal worth one line: `status` and the envelope's type and message."""

    def __init__(self, status: int, body: Any) -> None:
        err = body.get("error", {}) if isinstance(body, dict) else {}
        self.status, self.type = status, err.get("type") or str(status)
        self.message = err.get("message") or str(body)[:200]
        super().__init__(f"{status} {self.type}: {self.message}")


class SharedApi:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.http = client
        self.lineage, self.next_sequence, self.participant = "", 1, ""

    async def get(self, path: str, **params: Any) -> Any:
        r = await self.http.get(BASE + path, params=params or None)
        body = _json(r)
        if r.status_code != 200:
            raise SharedError(r.status_code, body)
        return body

    async def sync(self) -> dict:
        me = await self.get("/participant")
        self.lineage, self.next_sequence = me["lineage"], int(me["next_sequence"] or 1)
        self.participant = me["participant"] or ""
        return me

    async def ensure_registered(self) -> None:
        if not (await self.sync())["registered"]:
            await self.post("/participant")
            await self.sync()

    async def post(self, path: str, **fields: Any) -> dict:
        """A mutation; the receipt of a new one (201/202). A stale sequence is read again once."""
        for attempt in (0, 1):
            sequence = self.next_sequence
            body = {"schema": SCHEMA, "lineage": self.lineage, "operation_key": _operation_key(),
                    "sequence": str(sequence), **fields}
            r = await self.http.post(BASE + path, json=body)
            doc = _json(r)
            if r.status_code in (200, 201, 202):
                if r.status_code != 200:
                    self.next_sequence = sequence + 1
                return doc
            if r.status_code == 409 and attempt == 0 and _stale_sequence(doc):
                await self.sync()   # another client of this principal used the sequence
                continue
            raise SharedError(r.status_code, doc)
        raise AssertionError("unreachable")


def _stale_sequence(doc: Any) -> bool:
    """A 409 about the envelope's sequence (aotx.state.decide: "sequence N is ahead of ..." / "sequence N
    belongs to operation ... with other canonical bytes"), not one about the mutation itself."""
    message = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
    return isinstance(message, str) and message.startswith("sequence ")


def _operation_key() -> str:
    while True:
        key = secrets.token_hex(16)
        if int(key, 16):
            return key


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return {"error": {"type": str(r.status_code), "message": r.text[:200]}}
