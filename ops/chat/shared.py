"""Joined to a shared conversation: what every member says and the model's answers, as they are saved.

Two streams run while you type: the conversation's `input` events (GET /conversations/{con}/events,
stream=true), printed as `[author] text`, and for each input, in conversation order, its operation's
`output` events (GET /operations/{op}/events), printed as `model> ...` while they stream. A dropped
stream reconnects and resumes with Last-Event-ID from the last event it printed, so nothing is printed
twice or lost. A typed line is posted as an input; `/members`, `/memory`, `/cancel` (your last input),
`/help` and `/quit` are commands.
"""
from __future__ import annotations

import asyncio
import base64
import codecs
import json

import httpx

from .sse import events
from .shared_api import SharedApi, SharedError
from .terminal import read_line, say

RECONNECT_SECONDS = 0.5   # between a dropped stream and its reconnection
TERMINAL = ("completed", "cancelled", "interrupted", "failed", "deadline_exceeded")
HELP = "/members, /memory, /cancel (your last input), /help, /quit; any other line is posted as an input"


def short(participant: str | None) -> str:
    """`par-<lineage 8>…<ident 6>`: the lineage is the hash of the principal's name (the operator's), the
    ident a key the participant chose, so the label shows both: no one can wear another's label."""
    if not participant:
        return "?"
    parts = participant.split("-")
    if len(parts) == 3 and len(parts[1]) > 8 and len(parts[2]) > 6:
        return f"{parts[0]}-{parts[1][:8]}…{parts[2][-6:]}"
    return participant


class Printer:
    """Lines between the chunks of a streaming answer: an open answer line is closed first and
    reopened after."""

    def __init__(self) -> None:
        self.open = False

    def line(self, text: str) -> None:
        if self.open:
            say()
        say(text.replace("\n", "\n    "))   # another's newline cannot start a line of its own ("[you] ...")
        if self.open:
            say("model> ", end="")

    def chunk(self, text: str) -> None:
        if not self.open:
            say("model> ", end="")
            self.open = True
        say(text, end="")

    def close(self, note: str = "") -> None:
        if self.open or note:
            say((note and f" ({note})") if self.open else f"model> ({note})")
        self.open = False


class SharedChat:
    def __init__(self, client: httpx.AsyncClient, model: str, max_tokens: int | None) -> None:
        self.api = SharedApi(client)
        self.http, self.model, self.max_tokens = client, model, max_tokens
        self.con = self.space = ""
        self.mine: int | None = None          # the sequence of your last input
        self.answers: asyncio.Queue[str] = asyncio.Queue()
        self.out = Printer()

    async def join(self, conversation: str | None, space: str | None) -> None:
        await self.api.ensure_registered()
        if conversation:
            doc = await self.api.get(f"/conversations/{conversation}")
            self.con, self.space = conversation, doc["space"]
        else:
            receipt = await self.api.post(f"/spaces/{space}/conversations")
            self.con, self.space = receipt["resource"], str(space)
            say(f"created conversation {self.con}")
        say(f"joined {self.con} in space {self.space} as {self.api.participant} ({HELP})")

    # ---- the streams ----------------------------------------------------------------------------
    async def _stream(self, path: str, params: dict | None, handle) -> None:
        """An SSE route to its end, reconnecting with Last-Event-ID after a drop; `handle(event)` answers
        True when the stream is done."""
        last: str | None = None
        while True:
            headers = {"Last-Event-ID": last} if last else {}
            try:
                async with self.http.stream("GET", path, params=params, headers=headers,
                                            timeout=httpx.Timeout(30.0, read=None)) as r:
                    if r.status_code != 200:
                        raise SharedError(r.status_code, _json_of(await r.aread()))
                    async for ev in events(r):
                        if await handle(ev):
                            return
                        if ev.id:
                            last = ev.id
            except httpx.TransportError as exc:   # a dropped connection (also a server that went away)
                self.out.line(f"(stream {path.rsplit('/', 2)[-2]} dropped: {type(exc).__name__}; resuming)")
            await asyncio.sleep(RECONNECT_SECONDS)

    async def follow(self) -> None:
        async def on(ev) -> bool:
            if ev.event == "input":
                doc = ev.json()
                who = "you" if doc["author"] == self.api.participant else short(doc["author"])
                self.out.line(f"[{who}] {doc['text']}")
                await self.answers.put(doc["operation"])
            elif ev.event == "gap":
                self.out.line(f"(inputs {ev.json()['gap']} were retired)")
            elif ev.event == "error":
                self.out.line(f"(the conversation stream ended: {ev.json().get('error', {}).get('message')})")
                return True
            return False
        try:
            await self._stream(f"/aotx/v1/shared/conversations/{self.con}/events", {"stream": "true"}, on)
        except SharedError as exc:   # refused at (re)connection: rights gone, the token no longer accepted
            self.out.line(f"(the conversation stream ended: {exc}; /quit)")

    async def answer_all(self) -> None:
        while True:
            op = await self.answers.get()
            await self.answer(op)

    async def answer(self, op: str) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")

        async def on(ev) -> bool:
            doc = ev.json()
            if ev.event == "output":
                self.out.chunk(decoder.decode(base64.b64decode(doc["bytes"])))
                return False
            if ev.event == "end":
                tail = decoder.decode(b"", final=True)
                if tail:
                    self.out.chunk(tail)
                self.out.close("" if doc["execution"] == "completed" else doc["execution"])
                return True
            if ev.event == "error":
                self.out.close(f"unreadable: {doc.get('error', {}).get('message')}")
                return True
            return False
        try:
            await self._stream(f"/aotx/v1/shared/operations/{op}/events", None, on)
        except SharedError as exc:
            self.out.close(f"answer not readable: {exc}")

    # ---- what you type --------------------------------------------------------------------------
    async def command(self, line: str) -> bool:
        """Handle one typed line; False once the chat should end."""
        word = line.strip()
        try:
            if word == "/quit":
                return False
            if word == "/help":
                self.out.line(HELP)
            elif word == "/members":
                await self.members()
            elif word == "/memory":
                await self.memory()
            elif word == "/cancel":
                await self.cancel()
            elif word.startswith("/"):
                self.out.line(f"unknown command {word.split()[0]}; {HELP}")
            elif word:
                await self.post(line)
        except SharedError as exc:
            self.out.line(f"error: {exc}")
        return True

    async def post(self, text: str) -> None:
        fields = {"text": text, "model": self.model}
        if self.max_tokens is not None:
            fields["max_output_tokens"] = self.max_tokens
        receipt = await self.api.post(f"/conversations/{self.con}/inputs", **fields)
        self.mine = int(receipt["sequence"])

    async def members(self) -> None:
        doc = await self.api.get(f"/spaces/{self.space}/members")
        rows = [f"{m['participant']}{' (you)' if m['participant'] == self.api.participant else ''} "
                f"{','.join(m['permissions']) or '-'}" for m in doc["members"]]
        self.out.line(f"members of {self.space}: " + ("; ".join(rows) if rows else "only the owner"))

    async def memory(self) -> None:
        rows = (await self.api.get(f"/spaces/{self.space}/memory"))["memory"]
        self.out.line(f"memory of {self.space}: {len(rows)} object(s)")
        for row in rows:
            text = ""
            if row["kind"] in ("text", "source", "interpretation"):
                got = await self.api.get(f"/memory/{row['object']}")
                text = " " + base64.b64decode(got["data"]).decode("utf-8", "replace")[:80]
            self.out.line(f"  {row['object']} {row['kind']} v{row['version']} {row['byte_length']} bytes:{text}")

    async def cancel(self) -> None:
        if self.mine is None:
            self.out.line("nothing to cancel: you have posted no input in this chat")
            return
        await self.api.post(f"/conversations/{self.con}/cancellations", target_sequence=str(self.mine))
        self.out.line(f"(cancellation of your input {self.mine} saved)")


def _json_of(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return {"error": {"message": body[:200].decode("utf-8", "replace")}}


async def shared_chat(client: httpx.AsyncClient, model: str, max_tokens: int | None,
                      conversation: str | None, space: str | None) -> int:
    chat = SharedChat(client, model, max_tokens)
    try:
        await chat.join(conversation, space)
    except SharedError as exc:
        say(f"aotx chat: cannot join: {exc}")
        return 1
    tasks = [asyncio.create_task(chat.follow()), asyncio.create_task(chat.answer_all())]
    try:
        while True:
            line = await read_line()
            if line is None or not await chat.command(line):
                return 0
            if tasks[0].done():   # the conversation stream ended (rights gone)
                return 1
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
