"""The bounds of the stored state and its retention, in one place; each independently configurable.

A full table (or the byte budget) refuses new records with a clear error naming it (Reason.FULL),
as the shared core's capacities do, until a deletion or a recorded expiry frees room. Retention:
an idempotency key answers as absent `idempotency_ttl` seconds after it started (default 24 h); a
response is unknown `response_ttl` seconds after it was created (default 30 days, as OpenAI keeps
them; 0 = until deleted). Reads apply both at once; the runtime's sweep journals the expiry
(`stored.expired`) so the room is freed and a replay agrees.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

DAY = 86400


@dataclass(frozen=True)
class StoredLimits:
    responses: int = 65536               # stored responses, over every identity
    conversations: int = 16384
    keys: int = 65536                    # idempotency-key records
    items_per_conversation: int = 10000
    bytes: int = 1 << 30                 # every stored JSON and event byte
    command_bytes: int = 1 << 20         # the JSON of one command (a 10 MB metadata is refused)
    idempotency_ttl: int = DAY
    response_ttl: int = 30 * DAY         # 0: kept until deleted

    def __post_init__(self) -> None:
        for f in fields(self):
            value, low = getattr(self, f.name), 0 if f.name == "response_ttl" else 1
            if type(value) is not int or not low <= value <= 1 << 48:
                raise ValueError(f"stored limit {f.name} must be an integer in {low}..{1 << 48}, got {value!r}")

    def key_expired(self, started_at: int, now: int) -> bool:
        return now >= started_at + self.idempotency_ttl

    def response_expired(self, created_at: int, now: int) -> bool:
        return self.response_ttl > 0 and now >= created_at + self.response_ttl
