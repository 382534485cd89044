"""The runtime's connection to the log (one Recorder).

Either given (a test's MemoryRecorder, a caller's recorder: kept, its owner closes it) or opened
from a URL — bounded once booted, since the client library retries an unreachable server forever
on its own. After a write without an ack the connection is dropped (the client library would
otherwise re-send its buffered publish whenever it reconnects, after a read-back decided it was
lost) and the next read-back opens a fresh one. One outage of the log is one log line across
those fresh connections (OutageLog).
"""

from __future__ import annotations

import asyncio
import logging

from eventlog import JetStreamRecorder, NatsAuth, OutageLog, Recorder, StreamSpec

from ..log_setup import set_up

log = logging.getLogger("aotx.runtime")


class JournalConnection:
    def __init__(self, nats_url: str | None, spec: StreamSpec, *, recorder: Recorder | None = None,
                 timeout: float = 5.0, name: str = "aotx-runtime", auth: NatsAuth | None = None) -> None:
        if (nats_url is None) == (recorder is None):
            raise ValueError("give exactly one of nats_url or recorder")
        self.nats_url, self.spec, self.timeout, self.name = nats_url, spec, timeout, name
        self.auth = auth   # credentials for nats_url (eventlog.NatsAuth); never logged
        self.recorder: Recorder | None = recorder
        self.owned = recorder is None
        self._outage = None if nats_url is None else OutageLog(log, name, nats_url)

    async def ensure(self, *, booted: bool = True) -> Recorder:
        """The recorder, connecting first where there is none (bounded once booted). The stream's
        creation is asked again when another runtime creating it at the same moment made the server
        leave the request unanswered (aotx.log_setup)."""
        if self.recorder is None:
            def open_():
                return JetStreamRecorder.connect(self.nats_url, self.spec, timeout=self.timeout, name=self.name,
                                                 auth=self.auth, outage=self._outage)
            self.recorder = await asyncio.wait_for(set_up(f"the journal stream {self.spec.name}", open_),
                                                   timeout=max(4 * self.timeout, 2.0) if booted else None)
        return self.recorder

    async def drop(self) -> None:
        """After a write without an ack: close our connection (a given recorder is kept)."""
        if not self.owned or self.recorder is None:
            return
        recorder, self.recorder = self.recorder, None
        try:
            await recorder.close()
        except Exception as exc:  # closing a broken connection may fail; it is gone either way
            log.debug("closing the journal connection failed: %s", exc)

    async def close(self) -> None:
        """At stop: close a connection we opened (bounded: the recorder's close is)."""
        if self.recorder is not None and self.owned:
            recorder, self.recorder = self.recorder, None
            await recorder.close()
