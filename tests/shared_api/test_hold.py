"""Journal hold: a full stream answers 429 and changes nothing; reads go on; the hold lifts by itself."""

from __future__ import annotations

import pytest

from eventlog import JournalFull
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app


async def test_full_stream_holds_then_lifts_after_purge(nats_url):
    spec = fresh_spec(max_bytes=16 * 1024)
    async with shared_app(nats_url, spec, probe_interval=0.1) as (runtime, p, client):
        alice = p["alice"]
        await alice.sync()
        reg_body = alice.body()
        status, reg = await alice.post("/participant", reg_body)
        assert status == 201
        # another tenant of the stream fills it up
        filler = spec.subject("f" * 32, "filler")
        with pytest.raises(JournalFull):
            for i in range(10_000):
                await runtime.recorder.append(filler, b"x" * 64, msg_id=f"fill-{i}")
        before, messages = runtime.state_hash(), (await runtime.recorder.stream_info()).messages

        body = alice.body(scope="room")
        status, err = await alice.post("/spaces", body)
        assert status == 429 and err["error"]["type"] == "journal_hold", err
        assert "full" in err["error"]["message"]
        status, err = await alice.post("/spaces", body)            # still held, predicted from stream_info
        assert status == 429
        assert runtime.state_hash() == before
        assert (await runtime.recorder.stream_info()).messages == messages
        # reads and exact retries keep working during the hold
        me = await alice.sync()
        assert me["next_sequence"] == "2"
        assert await alice.get(f"/operations/{reg['operation']}") == (200, reg)
        assert await alice.post("/participant", reg_body) == (200, reg)
        status, caps = await alice.get("/capabilities")
        assert caps["journal"]["hold"] is True and caps["journal"]["reason"] == "full"
        assert "maximum bytes" in caps["journal"]["last_disk_error"]
        assert (await alice.get("/spaces"))[0] == 200

        # space returns: the operator purges the other tenant's subject; the hold lifts by itself
        await runtime.recorder.js.purge_stream(spec.name, subject=filler)
        async def journal() -> dict:
            return (await alice.get("/capabilities"))[1]["journal"]
        await wait_until_async(journal, "the hold to lift after the purge", done=lambda j: j["hold"] is False)
        status, sp = await alice.post("/spaces", body)
        assert status == 201 and sp["sequence"] == "2"
