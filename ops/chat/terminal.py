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


def say(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)
    sys.stdout.flush()
