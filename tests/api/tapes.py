"""Deterministic Delta tapes: what the engine could send, without a model."""
from __future__ import annotations

from dataclasses import dataclass

from aotx.engine.types import Delta, TokenLogprob, TopLogprob

PROMPT_TOKENS = 7
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}\n</tool_call>'
CALL_ARGS = '{"city": "Paris", "unit": "°C"}'


def _lp(text: str, k: int) -> TokenLogprob:
    b = text.encode()
    return TokenLogprob(token_id=k, token=text, bytes=b, logprob=-0.5 - k / 10,
                        top=(TopLogprob(k, text, b, -0.5 - k / 10), TopLogprob(99, "x", b"x", -3.0)))


def tape(pieces, finish="stop", *, stop_sequence=None, error=None, logprobs=False) -> list[Delta]:
    out = []
    for k, text in enumerate(pieces):
        out.append(Delta(text, token_ids=(k,), logprobs=(_lp(text, k),) if logprobs else (),
                         prompt_tokens=PROMPT_TOKENS, completion_tokens=k + 1))
    n = len(pieces) + (finish in ("stop",) and stop_sequence is None)
    out.append(Delta("", token_ids=(), finish_reason=finish, stop_sequence=stop_sequence,
                     prompt_tokens=PROMPT_TOKENS, completion_tokens=n, error=error))
    return out


@dataclass(frozen=True)
class Case:
    name: str
    deltas: list[Delta]
    tools: bool           # request carries tools
    text: str             # expected assembled text
    calls: tuple          # expected (name, arguments) pairs
    finish: str | None    # neutral finish: stop | length | tool_calls | None (error)
    stop_sequence: str | None = None
    logprobs: bool = False


def _split(s: str, k: int) -> list[str]:
    return [s[i:i + k] for i in range(0, len(s), k)]


CASES = [
    Case("plain", tape(["Hel", "lo", " world"]), False, "Hello world", (), "stop"),
    Case("utf8_split", tape(["caf", "é", " ", "😀", "中", "文"]), False, "café 😀中文", (), "stop"),
    Case("tool_one_delta", tape([CALL]), True, "", (("get_weather", CALL_ARGS),), "tool_calls"),
    Case("tool_many_deltas", tape(_split(CALL, 3)), True, "", (("get_weather", CALL_ARGS),),
         "tool_calls"),
    Case("text_then_tool", tape(["Let me check.", "\n<tool", "_call>", CALL[11:]]), True,
         "Let me check.", (("get_weather", CALL_ARGS),), "tool_calls"),
    Case("two_tools", tape([CALL, "\n", CALL.replace("Paris", "Rome")]), True, "",
         (("get_weather", CALL_ARGS), ("get_weather", CALL_ARGS.replace("Paris", "Rome"))),
         "tool_calls"),
    Case("tool_cut_by_budget", tape(['<tool_call>{"name": "get_weather", "argu'], "length"),
         True, '<tool_call>{"name": "get_weather", "argu', (), "length"),
    Case("tool_text_when_no_tools", tape([CALL]), False, CALL, (), "stop"),
    Case("stop_sequence", tape(["Hello", " there"], stop_sequence="END"), False, "Hello there",
         (), "stop", "END"),
    Case("length", tape(["a", "b", "c"], "length"), False, "abc", (), "length"),
    Case("error_mid_stream", tape(["Hel", "lo"], "error", error="device lost"), False, "Hello",
         (), None),
    Case("logprobs", tape(["Hi", " there"], logprobs=True), False, "Hi there", (), "stop",
         logprobs=True),
]
