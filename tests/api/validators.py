"""Event-automaton validators for the four stream surfaces.

Each takes raw SSE bytes, asserts the surface's protocol rules and returns
what a client would assemble, so tests can then check content.
"""
from __future__ import annotations

import json

from jiter import from_json

from aotx import strict_json


def _is_json(text: str) -> bool:
    """Strict JSON (aotx.strict_json: no NaN, no overflowing number, bounded nesting)."""
    try:
        strict_json.loads(text)
    except (json.JSONDecodeError, strict_json.JsonInputError):
        return False
    return True


def parse_sse(raw: bytes) -> list[tuple[str | None, object]]:
    text = raw.decode("utf-8")
    assert "\r" not in text, "LF framing only"
    assert text.endswith("\n\n"), "every event ends with a blank line"
    events = []
    for block in text[:-2].split("\n\n"):
        name, data = None, None
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                assert data is None, "one data line per event"
                data = value if value == "[DONE]" else json.loads(value)
            else:
                raise AssertionError(f"unexpected SSE line {line!r}")
        assert data is not None, "no bare event blocks"
        events.append((name, data))
    return events


def _openai_tail(events, include_usage: bool):
    """Shared by Chat and Completions: [DONE] last (or an error object last, no [DONE])."""
    assert all(name is None for name, _ in events), "OpenAI surfaces send no event: lines"
    datas = [d for _, d in events]
    if isinstance(datas[-1], dict) and "error" in datas[-1]:
        err = datas[-1]["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        assert "[DONE]" not in datas
        return datas[:-1], err
    assert datas[-1] == "[DONE]" and datas.count("[DONE]") == 1, "[DONE] exactly once, last"
    chunks = datas[:-1]
    usage = [c for c in chunks if c.get("usage")]
    if include_usage:
        assert len(usage) == 1 and usage[0] is chunks[-1], "usage exactly once, in the last chunk"
        assert usage[0]["choices"] == []
        u = usage[0]["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    else:
        assert not usage and all("usage" not in c or c["usage"] is None for c in chunks)
    return chunks, None


def validate_chat_stream(raw: bytes, *, n: int = 1, include_usage: bool = False) -> dict:
    chunks, error = _openai_tail(parse_sse(raw), include_usage)
    first = chunks[0]
    assert [c["index"] for c in first["choices"]] == list(range(n))
    state = {i: {"content": "", "tool_calls": [], "finish": None, "logprobs": [], "role": None}
             for i in range(n)}
    for k, chunk in enumerate(chunks):
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["id"] == first["id"] and chunk["created"] == first["created"]
        assert chunk["id"].startswith("chatcmpl-") and "error" not in chunk
        for choice in chunk["choices"]:
            s = state[choice["index"]]
            assert s["finish"] is None, "nothing after a choice's finish"
            delta = choice["delta"]
            if "role" in delta:
                assert k == 0 and s["role"] is None, "role only in the first chunk"
                s["role"] = delta["role"]
            assert k == 0 or "role" not in delta
            s["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                assert "function" in tc and "index" in tc
                if tc["index"] == len(s["tool_calls"]):
                    assert tc["id"].startswith("call_") and tc["type"] == "function"
                    assert tc["function"]["name"] and tc["function"]["arguments"] == ""
                    s["tool_calls"].append({"id": tc["id"], "name": tc["function"]["name"],
                                            "arguments": ""})
                else:
                    assert tc["index"] == len(s["tool_calls"]) - 1
                    assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                    s["tool_calls"][-1]["arguments"] += tc["function"]["arguments"]
            if choice.get("logprobs"):
                s["logprobs"] += choice["logprobs"]["content"]
            if choice["finish_reason"] is not None:
                s["finish"] = choice["finish_reason"]
    assert all(s["role"] == "assistant" for s in state.values())
    if error is None:
        assert all(s["finish"] for s in state.values()), "every choice finishes"
    return {"choices": state, "error": error, "chunks": chunks}


def validate_completion_stream(raw: bytes, *, choices: int = 1,
                               include_usage: bool = False) -> dict:
    chunks, error = _openai_tail(parse_sse(raw), include_usage)
    state = {i: {"text": "", "finish": None, "tokens": [], "offsets": []} for i in range(choices)}
    for chunk in chunks:
        assert chunk["object"] == "text_completion" and chunk["id"].startswith("cmpl-")
        assert chunk["id"] == chunks[0]["id"]
        for choice in chunk["choices"]:
            s = state[choice["index"]]
            assert s["finish"] is None, "nothing after a choice's finish"
            s["text"] += choice["text"]
            if choice["logprobs"]:
                lp = choice["logprobs"]
                assert len({len(lp[k]) for k in lp}) == 1, "parallel arrays"
                s["tokens"] += lp["tokens"]
                s["offsets"] += lp["text_offset"]
            s["finish"] = choice["finish_reason"]
    if error is None:
        assert all(s["finish"] in ("stop", "length") for s in state.values())
    return {"choices": state, "error": error, "chunks": chunks}


def validate_messages_stream(raw: bytes) -> dict:
    events = parse_sse(raw)
    for name, data in events:
        assert name == data["type"], "event name == data.type"
    assert events[0][0] == "message_start"
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["id"].startswith("msg_")
    blocks: list[dict] = []
    open_index = None
    result = {"message": start, "blocks": blocks, "error": None, "stop_reason": None}
    seen_delta = seen_stop = False
    for k, (name, data) in enumerate(events[1:], 1):
        assert not seen_stop, "nothing after message_stop"
        if name == "ping":
            continue
        if name == "error":
            assert k == len(events) - 1, "error is last"
            assert data["error"]["type"] and data["error"]["message"]
            result["error"] = data["error"]
            return result
        assert not seen_delta or name == "message_stop", "message_delta is followed by stop"
        if name == "content_block_start":
            assert open_index is None and data["index"] == len(blocks), "blocks in index order"
            block = dict(data["content_block"])
            assert block["type"] in ("text", "tool_use")
            if block["type"] == "tool_use":
                assert block["input"] == {} and block["id"].startswith("toolu_")
                block["partial_json"] = ""
            else:
                assert block["text"] == ""
            blocks.append(block)
            open_index = data["index"]
        elif name == "content_block_delta":
            assert data["index"] == open_index
            block, delta = blocks[open_index], data["delta"]
            if delta["type"] == "text_delta":
                assert block["type"] == "text"
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta" and block["type"] == "tool_use"
                block["partial_json"] += delta["partial_json"]
        elif name == "content_block_stop":
            assert data["index"] == open_index
            block = blocks[open_index]
            if block["type"] == "tool_use":
                # as the SDK reads it (jiter, partial mode): whole JSON, or (a call the budget cut
                # or the model left unfinished) a JSON prefix, which partial mode always reads
                raw = block.pop("partial_json")
                block["input"] = from_json(raw.encode(), partial_mode=True) if raw else {}
                assert isinstance(block["input"], dict)
                block["complete"] = not raw or _is_json(raw)
            open_index = None
        elif name == "message_delta":
            assert open_index is None, "all blocks closed before message_delta"
            assert set(data["delta"]) >= {"stop_reason", "stop_sequence"}
            assert isinstance(data["usage"]["output_tokens"], int)
            result["stop_reason"] = data["delta"]["stop_reason"]
            if data["delta"]["stop_reason"] == "tool_use":
                assert any(b.get("complete") for b in blocks), "tool_use: a call with whole JSON"
            result["stop_sequence"] = data["delta"]["stop_sequence"]
            result["usage"] = data["usage"]
            seen_delta = True
        elif name == "message_stop":
            assert seen_delta
            seen_stop = True
        else:
            raise AssertionError(f"unexpected event {name}")
    assert seen_stop, "stream ends with message_stop"
    return result


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def validate_responses_stream(raw: bytes) -> dict:
    events = parse_sse(raw)
    for k, (name, data) in enumerate(events):
        assert name == data["type"], "event name == data.type"
        assert data["sequence_number"] == k, "sequence_number contiguous from 0"
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert events[0][1]["response"]["output"] == [] and events[0][1]["response"]["status"] == "in_progress"
    assert names[-1] in _TERMINAL and sum(n in _TERMINAL for n in names) == 1
    items: list[dict] = []
    done: set[int] = set()
    error = None
    for name, data in events[2:-1]:
        if name == "response.output_item.added":
            assert data["output_index"] == len(items) and not (set(range(len(items))) - done)
            item = dict(data["item"])
            assert item["status"] == "in_progress"
            if item["type"] == "message":
                assert item["content"] == [] and item["id"].startswith("msg_")
                item["text"], item["parts"] = "", 0
            else:
                assert item["type"] == "function_call" and item["arguments"] == ""
                assert item["id"].startswith("fc_") and item["call_id"].startswith("call_")
            items.append(item)
        elif name == "response.content_part.added":
            assert items[data["output_index"]]["type"] == "message"
            assert data["content_index"] == 0 and items[-1]["parts"] == 0
            items[-1]["parts"] = 1
        elif name == "response.output_text.delta":
            item = items[data["output_index"]]
            assert item["type"] == "message" and item["parts"] == 1 and data["output_index"] not in done
            assert item["id"] == data["item_id"] and isinstance(data["logprobs"], list)
            item["text"] += data["delta"]
        elif name == "response.output_text.done":
            assert data["text"] == items[data["output_index"]]["text"]
        elif name == "response.content_part.done":
            assert data["part"]["text"] == items[data["output_index"]]["text"]
        elif name == "response.function_call_arguments.delta":
            item = items[data["output_index"]]
            assert item["type"] == "function_call" and item["id"] == data["item_id"]
            item["arguments"] += data["delta"]
        elif name == "response.function_call_arguments.done":
            item = items[data["output_index"]]
            assert data["arguments"] == item["arguments"] and data["name"] == item["name"]
        elif name == "response.output_item.done":
            assert data["output_index"] not in done
            status = data["item"]["status"]
            # a broken call (cut by the budget or left unfinished: its arguments are not whole
            # JSON) is "incomplete"; every other item "completed"
            assert status == "completed" or (
                status == "incomplete" and data["item"]["type"] == "function_call"
                and not _is_json(data["item"]["arguments"]))
            if data["item"]["type"] == "function_call":
                assert data["item"]["arguments"] == items[data["output_index"]]["arguments"]
            done.add(data["output_index"])
        elif name == "error":
            assert names[-1] == "response.failed" and events[-2][0] == "error"
            assert data["code"] and data["message"] and "param" in data
            error = data
        else:
            raise AssertionError(f"unexpected event {name}")
    final = events[-1][1]["response"]
    if names[-1] != "response.failed":
        assert done == set(range(len(items))), "every item closed before the terminal event"
        assert len(final["output"]) == len(items)
    return {"final": final, "items": items, "error": error, "terminal": names[-1]}
