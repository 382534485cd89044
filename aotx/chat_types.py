"""Surface-neutral chat values: every wire surface parses into these, the prompt builder reads them."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict = field(default_factory=dict)  # JSON Schema of the arguments object
    strict: bool = False    # the arguments are constrained to `parameters` (aotx.structured)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the arguments object as a JSON string, exactly as the model produced it


@dataclass(frozen=True)
class ChatMessage:
    role: str                                  # system | user | assistant | tool
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()      # assistant turns that called tools
    tool_call_id: str | None = None            # tool turns: which call this answers
    name: str | None = None                    # tool turns: the tool's name, when known
