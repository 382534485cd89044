"""An input's memory work: what to retain, what to recall, and the prompt it makes.

Runs after the input's lease is applied (inside its execution deadline), before generation:

1. the retained text = the input's text + one link per media row (aotx.memory.compose_text);
2. its embedding (all-MiniLM-L6-v2 over the text without the links);
3. recall: the top RECALL_K text memories visible in the conversation's space to the input's
   author by similarity to that embedding (where none is visible to him the recall is empty whatever
   the vector: the prompt is then built without waiting for the embedding, `can_recall`), read before this input is retained (an input never
   recalls itself), rendered by the lease's revision (rev 3 compact context + the historical-data
   rule, rev 4/5 shared source labels); links in recalled memory stay text. The author's rights
   are read at recall time (current grants ∩ membership): an author removed from the space, or
   blocked in an instance space, after his input's admission recalls nothing he may no longer read;
4. the prompt: the rendered memory as the system message (when there is any) + the input as the
   user message, through the model's chat template;
5. mode 2 only: the same model, asked for an interpretation of the input (INTERPRET_SYSTEM).

The MemoryRetained event is built here; the executor journals it (once: a restored admission
never repeats its memory input — it is not executed again at all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..chat_types import ChatMessage
from ..memory import (CONTEXT_LIMIT, HISTORICAL_DATA_RULE, MediaRef, MemoryOp, MemoryRetained, MemoryStore,
                      RenderedMemory, compose_text, embedding_text, render_memory, retention_event)
from ..state import Grants, State, SubmitInput, space_reader
from ..state.tables import raw
from ..state.vocab import Scope

RECALL_K = 4
ENTRY_OVERHEAD = 72         # bytes a rendered entry adds to its text: "- [label] ", a label line, newlines
INTERPRETATION_OVERHEAD = 24   # "  interpretation: " and its newline
INTERPRET_SYSTEM = ("Interpret the participant's message for a shared memory: say in one short sentence what it "
                    "means or asks. Answer with that sentence only.")
INTERPRET_MAX_TOKENS = 48
NO_INTERPRETATION = "(no interpretation)"
# rule + the chat template's system turn around a rendered context, in bytes (a token is at least one byte)
SYSTEM_OVERHEAD = len(HISTORICAL_DATA_RULE.encode("utf-8")) + 64


@dataclass(frozen=True)
class InputPlace:
    """Where an input lives: its operation, conversation, space and that space's scope."""

    op: MemoryOp
    conversation: bytes     # 32: lineage ‖ id
    space: bytes            # 32
    scope: Scope


def input_place(state: State, slot: int) -> InputPlace:
    row = state.receipts[slot]
    lineage, con_lineage, con_ident = raw(row["lineage"]), raw(row["resource_lineage"]), raw(row["resource_ident"])
    con_row = state.conversation_row(con_lineage, con_ident)
    assert con_row is not None  # an admitted input's conversation exists (apply checked it)
    space = state.spaces[int(state.conversations[con_row]["space"])]
    return InputPlace(MemoryOp(lineage, int(row["sequence"]), raw(row["operation"])), con_lineage + con_ident,
                      raw(space["lineage"]) + raw(space["ident"]), Scope(int(space["scope"])))


def entry_bound(text_bytes: int, interpretation_bytes: int | None) -> int:
    """Bytes one recalled memory can add to a rendered context (compacting only shrinks text)."""
    extra = 0 if interpretation_bytes is None else interpretation_bytes + INTERPRETATION_OVERHEAD
    return text_bytes + ENTRY_OVERHEAD + extra


def visible_entry_bytes(store: MemoryStore, space: bytes) -> int:
    """Bytes every memory recall could pick in `space` now would add to a rendered context."""
    return sum(entry_bound(len(t.payload), None if i is None else len(i.payload)) for t, i in store.visible_texts(space))


def memory_prompt_bound(entry_bytes: int) -> int:
    """At most how many tokens recalled memory adds to a prompt, given the entry bytes that could be
    recalled (those visible now + those inputs ahead may retain first): the rendered context within
    CONTEXT_LIMIT, the rule and the system turn. 0 when nothing can be recalled (the prompt is then
    the bare user turn). Tokens ≤ bytes."""
    if entry_bytes == 0:
        return 0
    from ..memory import HEADER
    return min(CONTEXT_LIMIT, len(HEADER.encode("utf-8")) + entry_bytes) + SYSTEM_OVERHEAD


def retained_text(request: SubmitInput) -> bytes:
    """An input's retained text: its text plus one link per media row."""
    return compose_text(request.text, [MediaRef(m.type, m.sha256) for m in request.media])


def embed(embedder: Any, text: bytes) -> np.ndarray:
    return embed_many(embedder, [text])[0]


def embed_many(embedder: Any, texts: list[bytes]) -> list[np.ndarray]:
    """One embedding call for several retained texts (the media links left out)."""
    return list(np.asarray(embedder.embed([embedding_text(t) for t in texts]), dtype=np.float32))


def recall_for(state: State, store: MemoryStore, space: bytes, author: bytes, grants: Grants, vector: np.ndarray,
               revision: int, k: int = RECALL_K) -> RenderedMemory:
    """What an input of `author` (a lineage, with his current grants) in `space` recalls now: only
    memory he may read at this moment."""
    reader = space_reader(state, state.participant_row(author), grants)
    return render_memory(revision, store.recall(space, vector, k, reader))


def nothing_recalled(revision: int) -> RenderedMemory:
    """What `recall_for` renders when it recalls nothing."""
    return render_memory(revision, [])


def can_recall(state: State, store: MemoryStore, space: bytes, author: bytes, grants: Grants) -> bool:
    """Whether `recall_for` could recall anything now, whatever the vector (False: it renders nothing)."""
    return store.can_recall(space, space_reader(state, state.participant_row(author), grants))


def prompt_messages(rendered: RenderedMemory, text: str) -> list[ChatMessage]:
    system = rendered.system_text()
    user = ChatMessage(role="user", content=text)
    return [ChatMessage(role="system", content=system), user] if system else [user]


def interpretation_messages(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=INTERPRET_SYSTEM), ChatMessage(role="user", content=text)]


def interpretation_bytes(answer: str) -> bytes:
    """The recorded interpretation: the model's answer, compacted, within the text limit."""
    from ..memory import TEXT_LIMIT, compact
    text = compact(answer) or NO_INTERPRETATION
    out = text.encode("utf-8")[:TEXT_LIMIT]
    return out.decode("utf-8", errors="ignore").encode("utf-8")


def retention(place: InputPlace, actor: bytes, mode: int, text: bytes, vector: np.ndarray,
              interpretation: bytes | None) -> MemoryRetained:
    return retention_event(place.op, place.conversation, place.space, place.scope, actor, mode, text, vector,
                           interpretation)
