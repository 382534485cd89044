"""Prompt building off the event loop, refused early when it cannot fit the context.

Rendering the chat template (jinja2) and tokenizing (HF `tokenizers`) take seconds on a
multi-MB prompt, so both run in a small pool of worker threads, never on the event loop
(`kernels.tokenizer.Tokenizer.encode` releases the GIL while it works). Before tokenizing there
is a cheap bound (`Tokenizer.min_tokens`): every token covers at most `max_token_bytes` bytes of
the text, so a text of B UTF-8 bytes (not counting bytes the vocabulary drops) has at least
ceil(B / max_token_bytes) tokens; when that alone is over the limit the prompt is refused without
being tokenized (`PromptTooLong`, a lower bound). A prompt under the bound is tokenized and its
exact length returned: the caller checks it against the context.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from aotx.chat_types import ChatMessage, ToolSpec
from aotx.prompt import build_template_messages

WORKERS = 2


class PromptTooLong(Exception):
    """The prompt has at least `tokens` tokens (a lower bound, not counted): over `limit`."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the prompt has at least {tokens} tokens; at most {limit} fit")
        self.tokens = tokens
        self.limit = limit


class PromptWork:
    """Chat and text prompts -> token ids, in worker threads. `limit`: the most prompt tokens the
    caller can accept (None: no early refusal)."""

    def __init__(self, tokenizer, template, workers: int = WORKERS) -> None:
        self._tokenizer = tokenizer
        self._template = template
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aotx-prompt")

    # -- on the event loop --------------------------------------------------------------
    async def chat(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                   tool_choice: str | None = None, *, primer: str = "", prefill: str = "",
                   limit: int | None = None) -> list[int]:
        return await self._run(self.chat_ids, messages, tools, tool_choice, primer, prefill, limit)

    async def text(self, text: str, *, limit: int | None = None) -> list[int]:
        return await self._run(self.text_ids, text, limit)

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- in a worker (or wherever a caller has small prompts) ---------------------------------
    def render(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
               tool_choice: str | None = None, primer: str = "") -> str:
        """The chat template's rendering, ending in an open assistant turn, plus `primer`."""
        rendered = self._template.render(build_template_messages(messages, tools, tool_choice),
                                         add_generation_prompt=True)
        return rendered + primer

    def chat_ids(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                 tool_choice: str | None = None, primer: str = "", prefill: str = "",
                 limit: int | None = None) -> list[int]:
        """The rendered chat, then `prefill` tokenized on its own (the answer continues it)."""
        rendered = self.render(messages, tools, tool_choice, primer)
        self._bound(rendered + prefill, limit)
        ids = self._tokenizer.encode(rendered)
        return ids + self._tokenizer.encode(prefill) if prefill else ids

    def text_ids(self, text: str, limit: int | None = None) -> list[int]:
        self._bound(text, limit)
        return self._tokenizer.encode(text)

    def _bound(self, text: str, limit: int | None) -> None:
        if limit is None:
            return
        at_least = self._tokenizer.min_tokens(text)
        if at_least > limit:
            raise PromptTooLong(at_least, limit)
