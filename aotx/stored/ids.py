"""Names in the stored state of the standard surfaces: identities, response / conversation / item ids, keys.

* An **identity** owns everything stored. With bearer tokens it is the principal's name; on loopback,
  where any key is accepted, it is `"key:" + sha256(api key)` (`identity_of_key`): the key itself is
  never stored nor journalled. A principal name may not begin with `key:` (the two never collide).
  Its records are journalled on the subject of `identity_lineage(identity)` (aotx.state.lineage_for).
* **IDs** are OpenAI-style, chosen by the caller (the gateway; `new_id`) and recorded in the event:
  `resp_` / `conv_` + 24..64 lowercase hex; an item id is a short lowercase prefix (`msg`, `fc`,
  `fco`, `rs`, …), `_`, 24..64 lowercase hex.
* An **idempotency key** is scoped to (identity, surface): surface one of SURFACES, key 1..255
  printable ASCII characters (the IETF draft's and Stripe's keys fit).
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from typing import Annotated, Any

from ..journal.wire import Require
from ..state.derive import lineage_for

KEY_PREFIX = "key:"
SURFACES = ("chat.completions", "completions", "messages", "responses")
MAX_IDENTITY = 256
MAX_KEY = 255

_RESPONSE = re.compile(r"resp_[0-9a-f]{24,64}")
_CONVERSATION = re.compile(r"conv_[0-9a-f]{24,64}")
_ITEM = re.compile(r"[a-z]{1,12}_[0-9a-f]{24,64}")
_KEY = re.compile(r"[\x20-\x7e]{1,%d}" % MAX_KEY)


def _is(pattern: re.Pattern, value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_response_id(value: Any) -> bool:
    return _is(_RESPONSE, value)


def is_conversation_id(value: Any) -> bool:
    return _is(_CONVERSATION, value)


def is_item_id(value: Any) -> bool:
    return _is(_ITEM, value)


def is_key(value: Any) -> bool:
    return _is(_KEY, value)


def is_surface(value: Any) -> bool:
    return value in SURFACES


def is_identity(value: Any) -> bool:
    """1..256 characters, none of them a control character."""
    return isinstance(value, str) and 0 < len(value) <= MAX_IDENTITY and value.isprintable()


def new_id(prefix: str) -> str:
    """A fresh id: `prefix` + "_" + 48 random hex digits (e.g. new_id("resp"))."""
    return f"{prefix}_{secrets.token_hex(24)}"


def identity_of_key(api_key: str) -> str:
    """The identity of a caller known only by the API key it presented (loopback, any key accepted)."""
    return KEY_PREFIX + hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def identity_of_principal(name: str) -> str:
    """The identity of an authenticated principal: its name (ValueError for one no identity can be)."""
    if not is_identity(name) or name.startswith(KEY_PREFIX):
        raise ValueError(f"principal name {name!r:.80} cannot own stored records "
                         f"(1..{MAX_IDENTITY} printable characters, not beginning with {KEY_PREFIX!r})")
    return name


@functools.lru_cache(maxsize=4096)
def identity_lineage(identity: str) -> bytes:
    """The lineage whose journal subject orders this identity's records (cached: replay asks once per
    stored event, for a few identities)."""
    return lineage_for(identity)


def _nonempty_or(test):
    return lambda value: value == "" or test(value)


def _all(test):
    return lambda values: all(test(v) for v in values) and len(set(values)) == len(values)


# wire types of event fields (aotx.journal.wire): a decoded value that fails its test is refused
Identity = Annotated[str, Require(is_identity, "not an identity")]
ResponseId = Annotated[str, Require(is_response_id, "not a response id (resp_ + 24..64 hex)")]
ConversationId = Annotated[str, Require(is_conversation_id, "not a conversation id (conv_ + 24..64 hex)")]
ItemId = Annotated[str, Require(is_item_id, "not an item id (prefix_ + 24..64 hex)")]
OptResponseId = Annotated[str, Require(_nonempty_or(is_response_id), "not a response id or \"\"")]
OptConversationId = Annotated[str, Require(_nonempty_or(is_conversation_id), "not a conversation id or \"\"")]
ItemIds = Annotated[tuple[str, ...], Require(_all(is_item_id), "not a list of distinct item ids")]
ResponseIds = Annotated[tuple[str, ...], Require(_all(is_response_id), "not a list of distinct response ids")]
Surface = Annotated[str, Require(is_surface, f"not a surface ({', '.join(SURFACES)})")]
Key = Annotated[str, Require(is_key, f"not an idempotency key (1..{MAX_KEY} printable ASCII)")]
Surfaces = Annotated[tuple[str, ...], Require(lambda v: all(map(is_surface, v)), "not a list of surfaces")]
Keys = Annotated[tuple[str, ...], Require(lambda v: all(map(is_key, v)), "not a list of idempotency keys")]
