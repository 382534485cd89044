"""Byte-level BPE tokenizer rebuilt from GGUF vocab + merges with HF ``tokenizers``.

Mirrors SmolLM2's ``tokenizer.json``: BPE model, pre-tokenizer
``Sequence([Digits(individual_digits=True), ByteLevel(add_prefix_space=False)])``,
ByteLevel decoder, and every vocab entry with GGUF token_type 3 (CONTROL)
registered as a special added token, so ``<|im_start|>`` encodes as one id.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from tokenizers import AddedToken, decoders, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

TOKEN_TYPE_CONTROL = 3


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte -> that byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Tokenizer:
    def __init__(self, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int],
                 bos_id: int, eos_id: int):
        self._tokens = list(tokens)
        vocab = {t: i for i, t in enumerate(self._tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        model = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
        tok = HFTokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
        tok.decoder = decoders.ByteLevel()
        self._special = frozenset(i for i, t in enumerate(token_types) if int(t) == TOKEN_TYPE_CONTROL)
        tok.add_special_tokens([
            AddedToken(self._tokens[i], special=True, normalized=False) for i in sorted(self._special)
        ])
        self._tok = tok
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        self._bytes = [self._compute_bytes(i) for i in range(len(self._tokens))]
        # every token covers at most this many bytes of text (see min_tokens)
        self.max_token_bytes = max(1, max(map(len, self._bytes), default=1))
        # bytes whose byte-level character has no token: encode drops them (no unk, no byte
        # fallback); SmolLM2 lacks 21, e.g. 0x04, 0x06 and the UTF-8 lead bytes 0xF1-0xF4
        self.dropped_bytes = bytes(sorted(b for c, b in byte_level_alphabet().items() if c not in vocab))

    @classmethod
    def from_gguf_metadata(cls, meta: Mapping[str, Any]) -> "Tokenizer":
        model = meta["tokenizer.ggml.model"]
        if model != "gpt2":
            raise ValueError(f"unsupported tokenizer model {model!r}: only byte-level BPE ('gpt2')")
        return cls(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.merges"],
                   meta["tokenizer.ggml.token_type"], meta["tokenizer.ggml.bos_token_id"],
                   meta["tokenizer.ggml.eos_token_id"])

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    def hf_json(self) -> str:
        """The HF ``tokenizers`` definition as JSON (what a grammar library such as llguidance reads)."""
        return self._tok.to_str()

    def _compute_bytes(self, token_id: int) -> bytes:
        text = self._tokens[token_id]
        if token_id in self._special:
            return text.encode("utf-8")
        alphabet = byte_level_alphabet()
        try:
            return bytes(alphabet[c] for c in text)
        except KeyError:  # not a byte-level string (never in SmolLM2): keep the text
            return text.encode("utf-8")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written literally are recognised. No BOS added.

        Releases the GIL while it works (``encode_batch`` does, ``encode`` does not), so a long text
        tokenized in a worker thread leaves the other threads and the event loop running."""
        return self._tok.encode_batch([text], add_special_tokens=False)[0].ids

    def min_tokens(self, text: str) -> int:
        """A lower bound of ``len(encode(text))`` without encoding: the tokens of a text cover its
        bytes but the dropped ones, each at most ``max_token_bytes`` of them."""
        data = text.encode("utf-8", errors="surrogatepass")
        covered = len(data) - sum(data.count(b) for b in self.dropped_bytes)
        return -(-covered // self.max_token_bytes)

    def token_bytes(self, token_id: int) -> bytes:
        """Exact raw bytes of one token (specials: their UTF-8 text). May be a partial UTF-8 sequence."""
        return self._bytes[token_id]

    def token_text(self, token_id: int) -> str:
        return self._bytes[token_id].decode("utf-8", errors="replace")

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Concatenate token bytes and decode UTF-8 (invalid sequences -> U+FFFD)."""
        data = b"".join(self._bytes[int(i)] for i in ids
                        if not (skip_special and int(i) in self._special))
        return data.decode("utf-8", errors="replace")

    def id_of(self, token: str) -> int:
        """Id of a vocabulary entry given in its stored (byte-level) spelling, e.g. ``'Ġthe'``."""
        tid = self._tok.token_to_id(token)
        if tid is None:
            raise KeyError(token)
        return tid

    def is_special(self, token_id: int) -> bool:
        return int(token_id) in self._special

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special
