"""One admitted input as the executor holds it, from its saved admission to its end."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..state import State, SubmitInput
from ..state.execution import ExecutionRecord


@dataclass
class PendingMemory:
    """An input's memory input still waiting for its embedding (its prompt did not need the vector):
    `build(vector)` makes the MemoryRetained event. A write that does not end the input takes it only
    once the embedding is `ready`; the input's end waits for it (aotx.runtime.input_journal)."""

    embedding: asyncio.Future
    build: Callable[[Any], Any]

    @property
    def ready(self) -> bool:
        return self.embedding.done()

    async def event(self) -> Any:
        """The memory input (the embedding's exception where it failed)."""
        return self.build(await self.embedding)


@dataclass
class Running:
    lineage: bytes
    sequence: int
    request: SubmitInput        # its parsed input (the admitted command's, or from its stored canonical bytes)
    pages: int = 0              # bound of the pages it will hold (what it claims)
    since: float = field(default_factory=time.monotonic)   # its place in the admission line
    claim: Any = None           # its page claim (aotx.engine), from its group until its request takes it over
    space: bytes = b""          # its conversation's space
    user_tokens: int = 0        # its prompt without recalled memory
    max_tokens: int = 0         # its output budget
    page_limit: int = 0         # its effective page limit (from its admission)
    entry: int = 0              # bytes its own memory may add to later recalls in that space
    retained: bool = False      # its memory input is committed (or it ended without one)
    embedding: Optional[asyncio.Future] = None   # its text's embedding, computed while it waits for its lease
    memory_event: Any = None    # its memory input, journalled with its next write (first output or completion)
    memory_later: Optional[PendingMemory] = None   # nothing recalled, so it did not wait for its embedding:
    #                             its memory input goes with its first write after the vector came, or its end
    task: Optional[asyncio.Task] = None
    handle: Any = None
    early_prompt: Optional[list] = None   # asked of the engine before its lease was applied (aotx.runtime.early_start)
    rendered: Optional[tuple] = None      # (messages, prompt ids): the last prompt rendered for it (`prompt`)
    slot: int = -1
    preleased: bool = False     # leased with its admission, waiting for that lease to be applied
    cancelled: bool = False
    expired: bool = False
    timer: Optional[asyncio.TimerHandle] = None

    @property
    def key(self) -> tuple[bytes, int]:
        return self.lineage, self.sequence

    def expire(self) -> None:
        self.expired = True
        if self.handle is not None:
            self.handle.cancel()

    @property
    def stopped(self) -> bool:
        return self.cancelled or self.expired

    def prompt(self, service: Any, messages: list) -> list[int]:
        """`service.chat_prompt(messages)`, rendered once for the same messages: where nothing is
        recalled, its page bound (the bare user turn), its early start and its run all want the same
        prompt, and the chat template and tokenizer run on the event loop (twice inside its admission's
        round otherwise). A copy each time: the caller may keep it."""
        if self.rendered is None or self.rendered[0] != messages:
            self.rendered = (list(messages), service.chat_prompt(messages))
        return list(self.rendered[1])

    def record(self, state: State) -> ExecutionRecord | None:
        """Its execution record in `state` (None once its receipt is gone)."""
        slot = state.receipt_slot(self.lineage, self.sequence)
        return None if slot is None else state.executions[slot]
