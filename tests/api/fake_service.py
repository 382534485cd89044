"""A ModelService stand-in that replays Delta tapes: route tests without a model."""
from __future__ import annotations

from aotx.engine import RequestRejected
from aotx.sampling_defaults import defaults_for
from quart import Quart

from api.app_common import install_common
from tests.api.tapes import tape


_COMPILER = None


class FakeHandle:
    def __init__(self, deltas, prompt_tokens):
        self._deltas = list(deltas)
        self.prompt_tokens = prompt_tokens
        self.cancelled = False

    def cancel(self):
        self.cancelled = True

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for delta in self._deltas:
            if self.cancelled:
                return
            yield delta


class FakeService:
    model_id = "smollm2-135m-instruct"
    created = 1700000000
    context_length = 8192
    default_max_tokens = 64
    vocab_size = 49152
    sampling_defaults = defaults_for("smollm2-135m-instruct")

    def __init__(self):
        self.tapes = [tape(["Hello", " world"])]
        self.submitted = []        # (prompt_ids, params, surface, lane)
        self.handles = []
        self.chat_calls = []
        self.primers = []
        self.reject = None

    def known_model(self, name):
        return name == self.model_id

    @property
    def constraints(self):
        """The real compiler over the real tokenizer (loaded on first use: only JSON modes need it)."""
        global _COMPILER
        if _COMPILER is None:
            from aotx.structured import ConstraintCompiler
            from kernels import load_model_cached
            _COMPILER = ConstraintCompiler(load_model_cached(progress=False).tokenizer)
        return _COMPILER

    def chat_prompt(self, messages, tools=(), tool_choice=None, primer=""):
        self.chat_calls.append((list(messages), list(tools), tool_choice))
        self.primers.append(primer)
        return [1, 2, 3]

    def text_prompt(self, text):
        return [ord(c) for c in text]

    context_tokens = context_length

    async def chat_prompt_ids(self, messages, tools=(), tool_choice=None, *, primer="", prefill="",
                              limit=None):
        ids = self.chat_prompt(messages, tools, tool_choice, primer)
        return ids + self.text_prompt(prefill) if prefill else ids

    async def text_prompt_ids(self, text, *, limit=None):
        return self.text_prompt(text)

    def token_bytes(self, token_id):
        return chr(token_id).encode()

    def token_text(self, token_id):
        return chr(token_id)

    async def stop(self):
        """Nothing runs in the background of a fake: the shutdown drain's engine stop is a no-op."""

    def submit(self, prompt_ids, params, *, surface, lane):
        if self.reject:
            raise RequestRejected(*self.reject)
        self.submitted.append((prompt_ids, params, surface, lane))
        deltas = self.tapes[min(len(self.handles), len(self.tapes) - 1)]
        handle = FakeHandle(deltas, len(prompt_ids))
        self.handles.append(handle)
        return handle


def make_app(service) -> Quart:
    from api.surfaces import chat, completions, messages, responses

    app = Quart(__name__)
    app.extensions["aotx"] = service
    for surface in (chat, completions, messages, responses):
        app.register_blueprint(surface.blueprint)
    install_common(app)
    return app
