"""POST /media over a real nats-server: blobs in the AOTX_MEDIA object store under their sha256,
uploaders recorded (source ownership, durable in the AOTX_MEDIA_OWNERS key-value bucket)."""

from __future__ import annotations

import hashlib
import os

import pytest

from .harness import fresh_spec, shared_app
from .test_inputs import _setup

PNG = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
WAV = b"RIFF" + os.urandom(32)


async def test_upload_answers_sha256_and_refuses_bad_requests(nats_url):
    async with shared_app(nats_url, fresh_spec(), media_max_bytes=1024) as (runtime, p, client):
        alice, bob, reader = p["alice"], p["bob"], p["reader"]
        status, got = await alice.post_blob(PNG, "image/png")
        assert status == 201, got
        assert got == {"sha256": hashlib.sha256(PNG).hexdigest(), "type": "image", "byte_length": len(PNG)}
        assert (await alice.post_blob(PNG, "image/png")) == (200, got)  # same principal, same bytes
        assert (await bob.post_blob(PNG, "image/png"))[0] == 201        # another uploader of the same bytes
        status, got = await alice.post_blob(WAV, "audio/wav")
        assert status == 201 and got["type"] == "audio" and got["sha256"] == hashlib.sha256(WAV).hexdigest()
        for ctype in ("application/json", "text/plain", "application/octet-stream", None):
            status, err = await alice.post_blob(PNG, ctype)
            assert status == 415, (ctype, err)
        status, err = await alice.post_blob(b"x" * 1025, "image/png")
        assert status == 413, err
        assert (await alice.post_blob(b"x" * 1024, "image/png"))[0] == 201  # exactly the cap
        status, err = await alice.post_blob(b"", "image/png")
        assert status == 400, err
        status, err = await alice.post_blob(PNG, "image/png", token=False)
        assert status == 401, err
        status, err = await reader.post_blob(PNG, "image/png")  # no shared_write grant
        assert status == 403, err
        stored = await client.app.extensions["aotx_shared"]["media"].get(hashlib.sha256(PNG).hexdigest())
        assert stored == PNG
        status, caps = await alice.get("/capabilities")
        assert status == 200 and caps["routes"]["media"] is True


async def test_default_cap_is_8_mib(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, client):
        status, err = await p["alice"].post_blob(b"\0" * (8 * 1024 * 1024 + 1), "image/png")
        assert status == 413, err


async def test_an_input_may_reference_only_own_uploads_and_ownership_survives_a_restart(nats_url, service):
    spec = fresh_spec()
    blob = b"\x89PNG" + os.urandom(48)
    async with shared_app(nats_url, spec, service=service) as (runtime, p, client):
        alice, bob = p["alice"], p["bob"]
        _, con = await _setup(p, bob_rights=["read", "write"])   # bob is a write member
        status, up = await alice.post_blob(blob, "image/png")
        assert status == 201
        media = [{"type": "image", "sha256": up["sha256"]}]
        # bob did not upload it: ownership is refused before the model capability is considered
        status, err = await bob.post(f"/conversations/{con}/inputs", bob.body(text="look", model=service.model_id,
                                                                               media=media))
        assert status == 409 and err["error"]["type"] == "media_not_owned", err
        assert "was not uploaded by you" in err["error"]["message"]
        # alice did: the text-only model's capability refusal follows
        status, err = await alice.post(f"/conversations/{con}/inputs", alice.body(text="look", model=service.model_id,
                                                                                   media=media))
        assert status == 409 and err["error"]["type"] == "unsupported_capability", err
    async with shared_app(nats_url, spec, service=service) as (runtime, p, client):  # a restarted runtime
        alice, bob = p["alice"], p["bob"]
        await alice.sync()
        await bob.sync()
        assert (await alice.post_blob(blob, "image/png"))[0] == 200  # alice's upload is remembered
        status, err = await alice.post(f"/conversations/{con}/inputs", alice.body(key="e" * 32, text="look", model=service.model_id,
                                                                                   media=media))
        assert status == 409 and err["error"]["type"] == "unsupported_capability", err
        status, err = await bob.post(f"/conversations/{con}/inputs", bob.body(key="d" * 32, text="look", model=service.model_id,
                                                                               media=media))
        assert status == 409 and err["error"]["type"] == "media_not_owned", err
