"""The one place that refuses what this server does not support, at parse time.

Each refusal is a 400 invalid_request_error naming the mode and the param, in
the calling surface's native envelope (the surface decides the envelope).
JSON modes are served (api.structured: constrained decoding); what they cannot enforce is refused
there, at parse time, in the same way.
"""
from __future__ import annotations

from api.errors import ApiError

MEDIA_PARTS = {
    # Chat Completions
    "image_url": "images", "input_audio": "audio", "file": "files",
    # Responses
    "input_image": "images", "input_file": "files", "input_audio": "audio",
    # Anthropic Messages
    "image": "images", "document": "documents",
}


def refuse_media(part_type: str, param: str) -> ApiError:
    kind = MEDIA_PARTS.get(part_type, "non-text content")
    return ApiError(400, f"Content of type '{part_type}' is not supported: the model is "
                         f"text-only and cannot read {kind}.", param=param,
                    code="unsupported_content")


def check_suffix(body: dict) -> None:
    """Completions: insertion (`suffix`) is not supported."""
    if body.get("suffix") not in (None, ""):
        raise ApiError(400, "'suffix' is not supported: the model cannot insert text.",
                       param="suffix", code="unsupported_parameter")
