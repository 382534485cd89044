"""Output budgets, the same on every route.

omitted / null -> the server default (also on Anthropic, whose upstream API
requires max_tokens: a documented quirk of this server), clipped to what fits
beside the prompt; 0 -> zero decode tokens; negative or non-integer -> 400
naming the client's own field; an explicit budget that cannot fit the
model's context beside the prompt -> 400 naming that field (ContextFit).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from api.errors import ApiError
from api.fields import is_int


def _field(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not is_int(value):
        raise ApiError(400, f"'{key}' must be an integer; got {value!r}.", param=key)
    if value < 0:
        raise ApiError(400, f"'{key}' must be non-negative; got {value}.", param=key)
    return value


def decode_budget(body: dict, key: str, default: int) -> int:
    """The budget in `body[key]`, or `default` when omitted or null."""
    value = _field(body, key)
    return default if value is None else value


def chat_budget(body: dict, default: int) -> int:
    """Chat takes `max_tokens` (deprecated) and `max_completion_tokens`; both -> the smaller."""
    values = [v for v in (_field(body, "max_tokens"), _field(body, "max_completion_tokens"))
              if v is not None]
    return min(values) if values else default


@dataclass(frozen=True)
class Ask:
    """The budget as the client sent it: the field it named and its value (None: omitted)."""
    field: str
    value: int | None


def asked(body: dict, *keys: str) -> Ask:
    """The explicit budget of `body` among `keys` (the smallest, as chat_budget takes it), else
    Ask(keys[0], None). Call it after the parser has validated the fields."""
    given = [(body[k], k) for k in keys if body.get(k) is not None]
    if not given:
        return Ask(keys[0], None)
    value, key = min(given)
    return Ask(key, int(value))


@dataclass(frozen=True)
class ContextFit:
    """Refuses a prompt, or a prompt + explicit budget, that cannot fit the model's context, in
    the surface's own words (OpenAI's and Anthropic's messages):

    * the prompt alone needs at least one token of room: prompt > context - 1 -> 400 naming the
      prompt field (`messages` / `prompt` / `input`);
    * an explicit budget must fit beside it: prompt + budget > context -> 400 naming the budget
      field the client sent;
    * an omitted budget never refuses: the engine clips the default to what fits.

    `prompt_ids` builds the prompt off the event loop and refuses one whose cheap token bound is
    already over (aotx.prompt_work) before it is tokenized."""
    context: int
    ask: Ask
    anthropic: bool = False
    prompt_field: str = "messages"
    output_word: str = "completion"

    @property
    def limit(self) -> int:
        """The most prompt tokens that can still be accepted."""
        return self.context - max(self.ask.value or 0, 1)

    def check(self, prompt_tokens: int) -> None:
        refusal = self.refusal(prompt_tokens)
        if refusal is not None:
            raise refusal

    def refusal(self, prompt_tokens: int, at_least: bool = False) -> ApiError | None:
        if prompt_tokens > self.context - 1:
            return self._prompt_error(prompt_tokens, at_least)
        if self.ask.value is not None and prompt_tokens + self.ask.value > self.context:
            return self._budget_error(prompt_tokens, at_least)
        return None

    async def prompt_ids(self, build: Callable[..., Awaitable[list[int]]], *args, **kwargs) -> list[int]:
        """`await build(*args, limit=..., **kwargs)`, checked."""
        from aotx.prompt_work import PromptTooLong
        try:
            ids = await build(*args, limit=self.limit, **kwargs)
        except PromptTooLong as exc:   # over the limit, so one of the two refusals
            raise (self.refusal(exc.tokens, at_least=True)
                   or self._prompt_error(exc.tokens, at_least=True)) from None
        self.check(len(ids))
        return ids

    def _prompt_error(self, tokens: int, at_least: bool) -> ApiError:
        some = "at least " if at_least else ""
        if self.anthropic:
            return ApiError(400, f"prompt is too long: {some}{tokens} tokens > {self.context - 1} maximum")
        return ApiError(400, f"This model's maximum context length is {self.context} tokens. However, your "
                             f"{self.prompt_field} resulted in {some}{tokens} tokens. Please reduce the "
                             f"length of the {self.prompt_field}.",
                        param=self.prompt_field, code="context_length_exceeded")

    def _budget_error(self, tokens: int, at_least: bool) -> ApiError:
        some, budget, field = "at least " if at_least else "", self.ask.value, self.ask.field
        if self.anthropic:
            return ApiError(400, f"input length and `{field}` exceed context limit: {some}{tokens} + "
                                 f"{budget} > {self.context}, decrease input length or `{field}` and "
                                 "try again")
        return ApiError(400, f"This model's maximum context length is {self.context} tokens. However, you "
                             f"requested {some}{tokens + budget} tokens ({some}{tokens} in the "
                             f"{self.prompt_field}, {budget} in the {self.output_word}). Please reduce "
                             f"the length of the {self.prompt_field} or {self.output_word}.",
                        param=field, code="context_length_exceeded")


def context_fit(service, body: dict, *keys: str, **words) -> ContextFit:
    """The ContextFit of a request to `service` whose budget fields are `keys` (see ContextFit)."""
    return ContextFit(int(service.context_tokens), asked(body, *keys), **words)
