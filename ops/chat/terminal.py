"""The terminal side: lines typed (readline where available, read in a daemon thread so streams keep
printing and a Ctrl-C never waits on a blocked read) and lines printed as they arrive."""
from __future__ import annotations

import asyncio
import sys
import threading

try:   # line editing and history for input() on a terminal; absent on some builds
    import readline  # noqa: F401
except ImportError:
    readline = None


async def read_line(prompt: str = "") -> str | None:
    """One typed line, None at end of input (Ctrl-D)."""
    loop = asyncio.get_running_loop()
    got: asyncio.Future = loop.create_future()

    def settle(value: str | None) -> None:
        if not got.done():
            got.set_result(value)

    def work() -> None:
        try:
            value = input(prompt)
        except (EOFError, OSError):   # end of input, or the terminal went away
            value = None
        try:
            loop.call_soon_threadsafe(settle, value)
        except RuntimeError:   # the loop closed meanwhile: nobody waits for the line
            pass

    threading.Thread(target=work, name="aotx-chat-input", daemon=True).start()
    return await got


# What others wrote, the model's output and the server's messages reach the terminal as text only: a
# control character (C0 but newline and tab, DEL, C1) or a bidi override would let them move the cursor,
# rewrite a line ("\r[you] ..."), clear the screen, set the title or the clipboard (OSC 52), or make the
# terminal type an answer into our input. Each is shown as a visible escape instead.
_VISIBLE = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A)}
_VISIBLE.update({c: f"\\u{c:04x}" for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]})


def visible(text: str) -> str:
    """`text` with every control character and bidi override written as an escape (\\x1b, \\u202e)."""
    return text.translate(_VISIBLE)


def say(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(visible(text) + end)
    sys.stdout.flush()
