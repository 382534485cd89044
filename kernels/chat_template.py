"""Render a GGUF/HF chat template (Jinja2) in a sandbox, with HF's helper functions."""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template called ``raise_exception`` or failed to render."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


class ChatTemplate:
    def __init__(self, source: str, bos_token: str = "", eos_token: str = ""):
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self._template = env.from_string(source)

    def render(self, messages: list[dict], add_generation_prompt: bool = True, **extra: Any) -> str:
        """Render ``messages``; ``extra`` (tools, documents, ...) are passed to the template."""
        context = {"bos_token": self.bos_token, "eos_token": self.eos_token}
        context.update(extra)
        try:
            return self._template.render(messages=messages,
                                         add_generation_prompt=add_generation_prompt, **context)
        except ChatTemplateError:
            raise
        except TemplateError as e:
            raise ChatTemplateError(f"chat template failed: {e}") from e
