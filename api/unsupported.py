"""The one place that refuses what this server does not support, at parse time.

Each refusal is a 400 invalid_request_error naming the mode and the param, in
the calling surface's native envelope (the surface decides the envelope).
"""
from __future__ import annotations

from api.errors import ApiError

SCHEMA_MODES = ("json_object", "json_schema")
MEDIA_PARTS = {
    # Chat Completions
    "image_url": "images", "input_audio": "audio", "file": "files",
    # Responses
    "input_image": "images", "input_file": "files", "input_audio": "audio",
    # Anthropic Messages
    "image": "images", "document": "documents",
}


def _schema_mode(value: object) -> str | None:
    """The schema-constrained mode named by a format value, if any."""
    if isinstance(value, str):
        return value if value in SCHEMA_MODES else None
    if isinstance(value, dict):
        kind = value.get("type")
        return kind if kind in SCHEMA_MODES else None
    return None


def _refuse_schema(param: str, mode: str) -> ApiError:
    return ApiError(400, f"'{param}' of type '{mode}' is not supported: this server never "
                         "constrains decoding to a schema. Use {\"type\": \"text\"} or omit it.",
                    param=param, code="unsupported_parameter")


def check_response_format(body: dict) -> None:
    """Chat and Completions: `response_format` json modes are refused."""
    mode = _schema_mode(body.get("response_format"))
    if mode:
        raise _refuse_schema("response_format", mode)


def check_text_format(body: dict) -> None:
    """Responses: `text.format` json modes are refused."""
    text = body.get("text")
    if isinstance(text, dict):
        mode = _schema_mode(text.get("format"))
        if mode:
            raise _refuse_schema("text.format", mode)


def check_output_format(body: dict) -> None:
    """Messages: `output_format` and `output_config.format` (structured outputs) are refused."""
    if body.get("output_format") is not None:
        raise ApiError(400, "'output_format' is not supported: this server never constrains "
                            "decoding to a schema.", param="output_format")
    config = body.get("output_config")
    if isinstance(config, dict) and config.get("format") is not None:
        raise ApiError(400, "'output_config.format' is not supported: this server never "
                            "constrains decoding to a schema.", param="output_config.format")


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
    "responses": ("presence_penalty", "frequency_penalty", "logit_bias", "top_k", "min_p"),
    "messages": ("presence_penalty", "frequency_penalty", "logit_bias", "min_p"),
}


def check_foreign_sampling(body: dict, surface: str) -> None:
    for key in FOREIGN_SAMPLING[surface]:
        if body.get(key) is not None:
            raise ApiError(400, f"'{key}' is not a parameter of this API; it is supported on "
                                "/v1/chat/completions and /v1/completions.", param=key,
                           code="unsupported_parameter")
