"""The plain chat: each typed line is one streamed `POST /v1/responses` turn; the history stays on the
server (a stored response), and the next turn names it with `previous_response_id`, so the client sends
only what is new and a long chat costs no re-upload. `/new` starts over, `/quit` (or Ctrl-D) ends."""
from __future__ import annotations

import json

import httpx

from .sse import events
from .terminal import read_line, say

PROMPT = "you> "
ANSWER = "model> "


class ChatError(Exception):
    """An answer the chat cannot go on from (printed as one line)."""


def error_text(r: httpx.Response, body: bytes) -> str:
    try:
        err = json.loads(body)["error"]
        return f"{r.status_code} {err.get('type') or ''}: {err.get('message')}".strip()
    except (ValueError, KeyError, TypeError):
        return f"{r.status_code} {body[:200]!r}"


async def turn(client: httpx.AsyncClient, model: str, text: str, previous: str | None,
               max_tokens: int | None) -> str | None:
    """Stream one turn to the terminal; the stored response's id (None when the server gave none)."""
    body = {"model": model, "input": text, "stream": True, "store": True}
    if previous is not None:
        body["previous_response_id"] = previous
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    rid, started, usage = None, False, None
    async with client.stream("POST", "/v1/responses", json=body) as r:
        if r.status_code != 200:
            raise ChatError(error_text(r, await r.aread()))
        async for ev in events(r):
            doc = ev.json() if ev.data.startswith("{") else {}
            if ev.event == "response.created":
                rid = doc["response"]["id"]
            elif ev.event == "response.output_text.delta":
                if not started:
                    say(ANSWER, end="")
                    started = True
                say(doc.get("delta", ""), end="")
            elif ev.event in ("response.completed", "response.incomplete"):
                usage = doc["response"].get("usage")
            elif ev.event in ("response.failed", "error"):
                say()
                raise ChatError(f"the response failed: {doc.get('response', doc)}")
    say("" if started else ANSWER)
    if usage:   # the stored response, and how much of the chat the model read (the history grows)
        say(f"  [{rid} · {usage['input_tokens']} tokens in · {usage['output_tokens']} out]")
    return rid


async def plain_chat(client: httpx.AsyncClient, model: str, max_tokens: int | None) -> int:
    say(f"aotx chat with {model} at {client.base_url} (/new starts over, /quit ends)")
    previous = None
    while True:
        line = await read_line(PROMPT)
        if line is None or line.strip() == "/quit":
            return 0
        if line.strip() == "/new":
            previous = None
            say("(a new chat)")
            continue
        if not line.strip():
            continue
        try:
            previous = await turn(client, model, line, previous, max_tokens)
        except ChatError as exc:
            say(f"error: {exc}")
        except httpx.HTTPError as exc:
            say(f"error: the server did not answer ({type(exc).__name__}: {exc})")
