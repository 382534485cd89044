"""What a POST /v1/responses asks of the stored state, decided before anything runs: whether it is stored,
what it continues, and the prompt that fits.

* `store` defaults to true, as OpenAI's does — where the app has a stored port. An app without one
  (a bare `create_app(service)`) defaults it to false and answers 400 `store_unavailable` to an
  explicit `store: true`, a `previous_response_id` or a `conversation` (api.stored_http).
* `previous_response_id`: the context is the stored chain (aotx.stored.queries.chain: every earlier
  input and output item in order, function calls and their outputs included; instructions are not
  carried over). Unknown, deleted, expired or another caller's → 404; one still running → 409.
* `conversation` (an id, or `{"id": ...}`): the context is the conversation's items; the response must
  be stored (its items are appended to the conversation when it ends), so `store: false` → 400;
  together with `previous_response_id` → 400.
* A context that does not fit the model beside the input → 400 naming `previous_response_id` (or
  `conversation`); with `truncation: "auto"` the oldest context items are dropped until it fits — a
  function_call and its output only together (api.surfaces.responses.truncation).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from aotx.stored import StoredRefusal
from aotx.stored.port import StoredJournal
from api import fields, structured
from api.budgets import context_fit
from api.errors import ApiError
from api.stored_access import caller_identity, stored_port
from api.stored_http import checked, require_port
from api.surfaces.response_items import as_items
from api.surfaces.responses.request import ResponsesRequest, parse_responses_request
from api.surfaces.responses.truncation import safe_cuts

TRUNCATION = ("auto", "disabled")


@dataclass
class StoredPlan:
    port: StoredJournal | None
    identity: str | None
    store: bool
    previous_response_id: str | None = None
    conversation: str | None = None
    truncation: str = "disabled"
    context: list[dict] = field(default_factory=list)      # the stored items this response continues
    input_items: list[dict] = field(default_factory=list)  # the input as items with ids (stored ones)

    @property
    def echo(self) -> dict:
        return {"store": self.store, "previous_response_id": self.previous_response_id,
                "conversation": {"id": self.conversation} if self.conversation else None,
                "truncation": self.truncation}

    @property
    def context_param(self) -> str:
        return "conversation" if self.conversation else "previous_response_id"


def _conversation_id(body: dict) -> str | None:
    raw = body.get("conversation")
    if isinstance(raw, dict):
        raw = raw.get("id")
        if not isinstance(raw, str):
            raise ApiError(400, "'conversation.id' must be a string.", param="conversation.id")
    if raw is not None and not isinstance(raw, str):
        raise ApiError(400, "'conversation' must be a conversation id or an object with its 'id'.",
                       param="conversation")
    return raw


async def plan_for(body: dict) -> StoredPlan:
    port = stored_port()
    explicit = None if body.get("store") is None else fields.opt_bool(body, "store")
    previous = fields.opt_str(body, "previous_response_id")
    conversation = _conversation_id(body)
    truncation = body.get("truncation") or "disabled"
    if truncation not in TRUNCATION:
        raise ApiError(400, "'truncation' must be 'auto' or 'disabled'.", param="truncation")
    if previous is not None and conversation is not None:
        raise ApiError(400, "'conversation' and 'previous_response_id' cannot be used together.",
                       param="conversation")
    if port is None:
        for name, value in (("store", explicit), ("previous_response_id", previous), ("conversation", conversation)):
            if value:
                require_port(name)
        return StoredPlan(None, None, False, truncation=truncation)
    store = True if explicit is None else explicit
    if conversation is not None and not store:
        raise ApiError(400, "A response with 'conversation' is appended to it, so it is stored: "
                            "'store': false cannot be used with 'conversation'.", param="store")
    identity = caller_identity()
    context: list[dict] = []
    if previous is not None:
        context = checked(await port.reads.chain(identity, previous))
    elif conversation is not None:
        found = await port.reads.all_conversation_items(identity, conversation)
        context = checked(replace(found, param="conversation") if isinstance(found, StoredRefusal) else found)
    plan = StoredPlan(port, identity, store, previous, conversation, truncation, context)
    if store:
        taken = [item["id"] for item in context] if conversation else ()
        plan.input_items = as_items(body.get("input"), taken=taken)
    return plan


async def fit_prompt(plan: StoredPlan, body: dict, svc) -> tuple[ResponsesRequest, list[int]]:
    """The request and its prompt ids: the context (all of it, or with `truncation: "auto"` the newest
    part that fits) then the input."""
    async def build(dropped: int) -> tuple[ResponsesRequest, list[int]]:
        req = await structured.parsed(parse_responses_request, body, svc,   # validates the budget first
                                      context=plan.context[dropped:])
        fit = context_fit(svc, body, "max_output_tokens", prompt_field="input", output_word="output")
        return req, await fit.prompt_ids(svc.chat_prompt_ids, req.messages, req.tools, req.tool_choice,
                                         primer=req.tool_primer)

    if not plan.context:
        return await build(0)
    try:
        return await build(0)
    except ApiError as exc:
        if exc.code != "context_length_exceeded":
            raise
        if plan.truncation != "auto":
            raise ApiError(400, f"The items of '{plan.context_param}' and the input do not fit the model's "
                                f"context: {exc.message} Send 'truncation': 'auto' to drop the oldest items.",
                           param=plan.context_param, code="context_length_exceeded") from None
    cuts = safe_cuts(plan.context, body.get("input"))   # never a function_call without its output
    if not cuts:
        raise ApiError(400, f"The function calls of '{plan.context_param}' that the input answers do not fit the "
                            "model's context beside it, and they cannot be dropped without their outputs.",
                       param=plan.context_param, code="context_length_exceeded")
    low, high = 0, len(cuts) - 1               # the fewest dropped items that fit: all of them must
    try:                                       # (else the input alone does not fit: that error names it)
        best = await build(cuts[high])
    except ApiError as exc:
        if exc.code != "context_length_exceeded" or cuts[high] == len(plan.context):
            raise
        raise ApiError(400, f"The function calls of '{plan.context_param}' that the input answers do not fit "
                            f"the model's context beside it: {exc.message}", param=plan.context_param,
                       code="context_length_exceeded") from None
    while low < high:
        mid = (low + high) // 2
        try:
            best, high = await build(cuts[mid]), mid
        except ApiError as exc:
            if exc.code != "context_length_exceeded":
                raise
            low = mid + 1
    return best
