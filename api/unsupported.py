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


# Sampling parameters a surface's wire format does not define: refused when sent (not null), never
# ignored. Responses defines temperature / top_p only; Messages temperature / top_p / top_k.
FOREIGN_SAMPLING = {
    "responses": ("presence_penalty", "frequency_penalty", "logit_bias", "top_k", "min_p", "ignore_eos"),
    "messages": ("presence_penalty", "frequency_penalty", "logit_bias", "min_p", "ignore_eos"),
}


def check_foreign_sampling(body: dict, surface: str) -> None:
    for key in FOREIGN_SAMPLING[surface]:
        if body.get(key) is not None:
            raise ApiError(400, f"'{key}' is not a parameter of this API; it is supported on "
                                "/v1/chat/completions and /v1/completions.", param=key,
                           code="unsupported_parameter")
