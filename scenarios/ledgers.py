"""The client's two ledgers, pure bookkeeping (no requests).

`Acknowledged`: every operation acknowledged new (201/202) exactly once, with its receipt as last read
and the command as sent (kept to retry it exactly). A later read of a receipt may differ from the
acknowledged one only as `receipt_change` allows: other receipts never change; an input's only
progresses.

`Results`: what must still be readable of every input result: each byte read so far (by offset, or from
the operation's SSE stream) must agree with every byte read before, across restarts and resumes, and an
ended result's summary never changes.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from .violation import ScenarioViolation
from .vocabulary import TERMINAL

# receipt fields of an input that never change; the rest (execution, lease, output, result) only progress
_STABLE = ("operation", "sequence", "kind", "resource", "command_bytes", "model_digest", "page_limit", "event_cursor")
_RANK = {"queued": 0, "running": 1}
# what an ended result reports about itself (a result span at its end, or a stream's `end` event)
SUMMARY = ("execution", "saved_bytes", "input_tokens", "output_tokens", "finish")


def receipt_change(prior: dict[str, Any], got: dict[str, Any]) -> str | None:
    """What is wrong with `got` as a later read of the receipt `prior`, or None. Other receipts never
    change; an input's may only progress (queued → running → one terminal state, output growing)."""
    if prior == got:
        return None
    if not isinstance(got, dict) or "execution" not in prior or "execution" not in got:
        return "the receipt changed"
    for key in _STABLE:
        if prior.get(key) != got.get(key):
            return f"{key} changed from {prior.get(key)!r} to {got.get(key)!r}"
    if prior["execution"] in TERMINAL:
        return f"a terminal ({prior['execution']}) receipt changed"
    if _RANK.get(got["execution"], 2) < _RANK.get(prior["execution"], 2):
        return f"execution went back from {prior['execution']} to {got['execution']}"
    if got["output_bytes"] < prior["output_bytes"]:
        return f"saved output shrank from {prior['output_bytes']} to {got['output_bytes']} bytes"
    if prior["cancel_requested"] and not got["cancel_requested"]:
        return "a cancellation request vanished"
    if prior["lease"] is not None and got["lease"] != prior["lease"]:
        return f"the lease changed from {prior['lease']} to {got['lease']}"
    return None


def same_receipt(prior: dict[str, Any], got: dict[str, Any]) -> bool:
    """`got` is the receipt `prior` read again: identical, or an input's that only progressed."""
    return receipt_change(prior, got) is None


@dataclass
class Sent:
    """A mutation as the client sent it (kept to retry it exactly)."""

    actor: str
    kind: str
    path: str
    fields: dict[str, Any]
    space: str | None
    seq: int
    key: str
    raw: bytes


@dataclass
class Acknowledged:
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)   # operation id -> receipt as last read
    sent: dict[tuple[str, int], Sent] = field(default_factory=dict)     # (actor, sequence) -> the admitted command

    def admit(self, sent: Sent, receipt: dict[str, Any], what: str) -> str:
        """Record a new operation's receipt (once per operation, for the sequence it was sent with);
        answers its operation id."""
        op = receipt.get("operation")
        if not isinstance(op, str) or op in self.receipts:
            raise ScenarioViolation(f"{what}: operation {op} was acknowledged before (it appears twice)")
        if receipt.get("sequence") != str(sent.seq):
            raise ScenarioViolation(f"{what}: receipt of sequence {receipt.get('sequence')}")
        self.receipts[op] = receipt
        self.sent[(sent.actor, sent.seq)] = sent
        return op

    def progressed(self, op: str, receipt: dict[str, Any]) -> None:
        """A later read of an input's receipt: keep the latest."""
        self.receipts[op] = receipt


@dataclass
class Results:
    bytes: dict[str, bytes] = field(default_factory=dict)             # input operation -> result bytes read so far
    finals: dict[str, dict[str, Any]] = field(default_factory=dict)   # input operation -> its ended summary

    def read_so_far(self, op: str) -> int:
        return len(self.bytes.get(op, b""))

    def add(self, op: str, what: str, offset: int, data: bytes) -> None:
        """Bytes read at `offset`: they agree with every byte read of this result before, leave no gap, and
        stay within an ended result."""
        seen = self.bytes.get(op, b"")
        if offset > len(seen):
            raise ScenarioViolation(f"{what}: read at {offset} past the {len(seen)} bytes read before (a gap)")
        overlap = seen[offset:offset + len(data)]
        if data[:len(overlap)] != overlap:
            raise ScenarioViolation(f"{what}: bytes at {offset} differ from what was read before: {data!r} vs "
                                    f"{overlap!r}")
        if offset + len(data) > len(seen) or op not in self.bytes:
            self.bytes[op] = seen[:offset] + data if offset + len(data) > len(seen) else seen
        fin = self.finals.get(op)
        if fin is not None and len(self.bytes[op]) > fin["saved_bytes"]:
            raise ScenarioViolation(f"{what}: more bytes than the {fin['saved_bytes']} of the ended result")

    def span(self, op: str, what: str, body: dict[str, Any]) -> None:
        """One span of GET /operations/{op}/result: consistent in itself, then added."""
        data = base64.b64decode(body["bytes"])
        offset = int(body["offset"])
        if len(data) != body["byte_length"] or body["next_offset"] != offset + len(data):
            raise ScenarioViolation(f"{what}: span of {len(data)} bytes reports byte_length {body['byte_length']}, "
                                    f"next_offset {body['next_offset']}")
        if body["saved_bytes"] < body["next_offset"]:
            raise ScenarioViolation(f"{what}: next_offset {body['next_offset']} beyond saved {body['saved_bytes']}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if body["text"] != text:
            raise ScenarioViolation(f"{what}: text {body['text']!r} for bytes {data!r}")
        self.add(op, what, offset, data)

    def final(self, op: str, what: str, summary: dict[str, Any]) -> None:
        """An ended result's summary: the same whenever read, and every saved byte was read."""
        prior = self.finals.setdefault(op, summary)
        if prior != summary:
            raise ScenarioViolation(f"{what}: the ended result changed: {summary} vs {prior}")
        if self.read_so_far(op) != summary["saved_bytes"]:
            raise ScenarioViolation(f"{what}: ended with {summary['saved_bytes']} bytes, read {self.read_so_far(op)}")
