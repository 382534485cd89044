"""POST /media (a blob into the NATS object store) and the source-ownership check of an input's media."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, request

from aotx.state import SubmitInput

from ..errors import ApiError
from .common import actor, json_answer, shared

MEDIA_MAX_BYTES = 8 * 1024 * 1024
_MEDIA_KINDS = ("image", "audio")


async def foreign_media(mutation: SubmitInput, store: Any, principal: str) -> None:
    """Source ownership, checked before the model-capability refusal: a well-formed input may
    reference only media its author (`principal`) uploaded to `store` (409 media_not_owned)."""
    for ref in mutation.media:
        if store is None or not await store.uploaded_by(ref.sha256, principal):
            raise ApiError(409, f"media {ref.sha256} was not uploaded by you: an input may reference only media "
                           "its author uploaded (POST /media)", type="media_not_owned")


def register(bp: Blueprint) -> None:
    @bp.post("/media")
    async def media():
        """The raw blob (Content-Type image/* or audio/*), stored under its sha256; 201 new, 200 when
        this principal uploaded the same bytes before."""
        ext = shared()
        if not actor().grants.shared_write:
            raise ApiError(403, "uploading media needs the shared_write grant", type="forbidden")
        kind = (request.mimetype or "").partition("/")[0]
        if kind not in _MEDIA_KINDS:
            raise ApiError(415, f"Content-Type must be image/* or audio/*, got {request.mimetype or 'none'!r}",
                           type="unsupported_media_type")
        store, cap = ext["media"], ext["media_max_bytes"]
        if store is None:
            raise ApiError(409, "this server has no media store: it does not accept media", type="unsupported")
        if request.content_length is not None and request.content_length > cap:
            raise ApiError(413, f"media is {request.content_length} bytes; at most {cap}", type="too_large")
        chunks, size = [], 0
        async for chunk in request.body:
            size += len(chunk)
            if size > cap:
                raise ApiError(413, f"media exceeds {cap} bytes", type="too_large")
            chunks.append(chunk)
        data = b"".join(chunks)
        if not data:
            raise ApiError(400, "the media body is empty", type="invalid_request")
        stored = await store.put(data, actor().principal, request.mimetype)
        return json_answer(201 if stored.created else 200,
                           {"sha256": stored.sha256, "type": kind, "byte_length": stored.byte_length})
