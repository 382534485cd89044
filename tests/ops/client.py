"""A minimal synchronous client of /aotx/v1/shared for process-level tests."""
from __future__ import annotations

import itertools
import secrets
from typing import Any

import httpx

BASE = "/aotx/v1/shared"
SCHEMA = "aotx.shared.mutation.v1"


class SharedClient:
    def __init__(self, base_url: str, token: str | None, *, first_key: int = 1) -> None:
        """`first_key`: where its operation keys start; a client of a principal that other clients of the
        same server used before (the session `server`) starts at a random one (fresh_keys)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url + BASE, headers=headers, timeout=30)
        self.lineage, self.next_sequence = "", 1
        self._keys = itertools.count(first_key)

    def get(self, path: str) -> tuple[int, Any]:
        r = self.http.get(path)
        assert r.headers.get("Cache-Control") == "no-store", path
        return r.status_code, r.json()

    def sync(self) -> dict:
        status, me = self.get("/participant")
        assert status == 200, me
        self.lineage, self.next_sequence = me["lineage"], int(me["next_sequence"])
        return me

    def post(self, path: str, **fields: Any) -> tuple[int, Any]:
        body = {"schema": SCHEMA, "lineage": self.lineage, "operation_key": f"{next(self._keys):032x}",
                "sequence": str(self.next_sequence), **fields}
        r = self.http.post(path, json=body)
        if r.status_code in (201, 202):   # an accepted input (202) takes its sequence too
            self.next_sequence += 1
        return r.status_code, r.json()

    def skip_keys(self, n: int) -> None:
        for _ in range(n):
            next(self._keys)

    @classmethod
    def fresh_keys(cls, base_url: str, token: str | None) -> "SharedClient":
        """A client whose operation keys no other client of this principal used (random 64-bit start)."""
        return cls(base_url, token, first_key=secrets.randbits(64) | 1)

    def close(self) -> None:
        self.http.close()
