"""Deterministic Delta tapes: what the engine could send, without a model."""
from __future__ import annotations

import json
from dataclasses import dataclass

from aotx.engine.types import Delta, TokenLogprob, TopLogprob

PROMPT_TOKENS = 7
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "°C"}}\n</tool_call>'
CALL_ARGS = '{"city": "Paris", "unit": "°C"}'
# the arguments' own closing brace missing: the repair adds it as the last fragment
CUT_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Pa'
BROKEN_CALL = CUT_CALL + '</tool_call>'
NAN_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "temp": NaN}}</tool_call>'
REPAIRED_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"\n</tool_call>'


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
    blocks: tuple | None = None   # Anthropic content, when not (text, then the calls)
    streamed: tuple | None = None  # (text, calls) of the stream, where it differs: a broken call

    def shape(self, streamed: bool) -> tuple[str, tuple]:
        """(text, calls) of the buffered answer, or of the stream."""
        return self.streamed if streamed and self.streamed is not None else (self.text, self.calls)


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
    # seed 001: an unrepairable cut returns as assistant content, finish length; a stream has
    # sent the fragments already, so there the call ends with them (and finish length)
    Case("tool_cut_in_arguments", tape(["Sure.\n", *_split(CUT_CALL, 4)], "length"), True,
         "Sure.\n" + CUT_CALL, (), "length",
         streamed=("Sure.", (("get_weather", '{"city": "Pa'),))),
    # a cut that at most two closing brackets complete is a call: "completes to tool_calls"
    Case("tool_cut_repaired", tape(_split(CUT_CALL + 'ris", "days": [1, 2', 4), "length"), True,
         "", (("get_weather", '{"city": "Paris", "days": [1, 2]}'),), "tool_calls"),
    # the model closed the call inside a string: the same two shapes, the finish is "stop"
    Case("tool_broken_by_the_model", tape(["Sorry. ", *_split(BROKEN_CALL, 5)]), True,
         "Sorry. " + BROKEN_CALL, (), "stop",
         streamed=("Sorry.", (("get_weather", '{"city": "Pa'),))),
    Case("tool_nan_arguments", tape(_split(NAN_CALL, 6)), True, NAN_CALL, (), "stop",
         streamed=("", (("get_weather", '{"city": "Paris", "temp":'),))),
    Case("tool_repaired", tape(_split(REPAIRED_CALL, 4)), True, "",
         (("get_weather", '{"city": "Paris"}'),), "tool_calls"),
    Case("text_tool_text", tape(["Let me check.\n", *_split(CALL, 5), "\nDone."]), True,
         "Let me check.Done.", (("get_weather", CALL_ARGS),), "tool_calls",
         blocks=(("text", "Let me check."), ("tool_use", "get_weather", json.loads(CALL_ARGS)),
                 ("text", "Done."))),
    Case("tool_text_when_no_tools", tape([CALL]), False, CALL, (), "stop"),
    Case("stop_sequence", tape(["Hello", " there"], stop_sequence="END"), False, "Hello there",
         (), "stop", "END"),
    Case("length", tape(["a", "b", "c"], "length"), False, "abc", (), "length"),
    Case("error_mid_stream", tape(["Hel", "lo"], "error", error="device lost"), False, "Hello",
         (), None),
    Case("logprobs", tape(["Hi", " there"], logprobs=True), False, "Hi there", (), "stop",
         logprobs=True),
]


# ------------------------------------------------------------ tapes through the real detokenizer
EOS = b"<|im_end|>"


class _Vocab:
    def __init__(self, tokens):
        self.tokens = tokens

    def token_bytes(self, token_id):
        return self.tokens[token_id]


def token_lp(raw: bytes, k: int) -> TokenLogprob:
    text = raw.decode("utf-8", errors="replace")
    return TokenLogprob(token_id=k, token=text, bytes=raw, logprob=-0.25 - k / 100,
                        top=(TopLogprob(k, text, raw, -0.25 - k / 100),
                             TopLogprob(99, "x", b"x", -4.0)))


def engine_tape(tokens, *, stop=(), eos=True, max_tokens=None) -> list[Delta]:
    """The deltas the engine sends for `tokens` (bytes each), with logprobs: text through the
    engine's own Detokenizer (UTF-8 and stop-string hold-back), the end token last when `eos`,
    the budget cut as the engine cuts it (aotx.engine.engine._postprocess)."""
    from aotx.engine.detokenizer import Detokenizer

    vocab = list(tokens) + ([EOS] if eos else [])
    detok = Detokenizer(_Vocab(vocab), tuple(stop), {len(tokens)} if eos else set())
    limit = max_tokens if max_tokens is not None else len(vocab)
    out = []
    for k in range(min(len(vocab), limit)):
        step = detok.add(k)
        text, reason, seq = step.text, step.finish_reason, step.stop_sequence
        if reason is None and k + 1 >= limit:
            tail = detok.flush()
            text, reason, seq = text + tail.text, tail.finish_reason or "length", tail.stop_sequence
        out.append(Delta(text, token_ids=(k,), logprobs=(token_lp(vocab[k], k),),
                         finish_reason=reason, stop_sequence=seq, prompt_tokens=PROMPT_TOKENS,
                         completion_tokens=k + 1))
        if reason is not None:
            break
    return out


def run(projector, tapes) -> bytes:
    """Interleave the tapes round-robin (choice i gets tapes[i]) through the projector."""
    out = b"".join(e.encode() for e in projector.open())
    cursors = [0] * len(tapes)
    while not projector.done and any(c < len(t) for c, t in zip(cursors, tapes)):
        for i, t in enumerate(tapes):
            if cursors[i] < len(t) and not projector.done:
                out += b"".join(e.encode() for e in projector.feed(i, t[cursors[i]]))
                cursors[i] += 1
    assert projector.done
    return out
