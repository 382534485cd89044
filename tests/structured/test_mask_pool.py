"""The size of llguidance's mask pool (aotx.structured.batch.threads): small by default, so its threads
never crowd the engine, main and worker threads off the cores (docs/PERFORMANCE.md, "the mask worker")."""
from __future__ import annotations

import pytest

from aotx.structured import batch


@pytest.mark.parametrize("cpus, want", [(1, 1), (2, 1), (8, 1), (16, 2), (32, 4), (128, 4)])
def test_default_pool_is_an_eighth_of_the_cpus_at_most_four(monkeypatch, cpus, want):
    monkeypatch.delenv("AOTX_MASK_THREADS", raising=False)
    monkeypatch.setattr(batch.os, "cpu_count", lambda: cpus)
    assert batch.threads() == want


def test_the_environment_sets_the_pool(monkeypatch):
    monkeypatch.setenv("AOTX_MASK_THREADS", "12")
    assert batch.threads() == 12


@pytest.mark.parametrize("cpus, want", [(2, 1), (16, 2), (32, 4)])
def test_a_lexer_per_pool_thread_by_default(monkeypatch, cpus, want):
    monkeypatch.delenv("AOTX_MASK_LEXERS", raising=False)
    monkeypatch.delenv("AOTX_MASK_THREADS", raising=False)
    monkeypatch.setattr(batch.os, "cpu_count", lambda: cpus)
    assert batch.lexers() == want
    monkeypatch.setenv("AOTX_MASK_THREADS", "3")
    assert batch.lexers() == 3
    monkeypatch.setenv("AOTX_MASK_LEXERS", "5")
    assert batch.lexers() == 5


def test_the_compiler_builds_every_prototype_and_start_builds_none(monkeypatch, compiler):
    """The lexers' prototypes are built where the constraint is compiled (off the event loop), never by
    ``start`` (called on the event loop when a request is submitted)."""
    monkeypatch.setenv("AOTX_MASK_LEXERS", "3")
    constraint = compiler.json_schema({"type": "object", "properties": {"lexers": {"type": "integer"}}})
    assert constraint.prototypes == 3
    protos = list(constraint._proto)
    rows = [constraint.start() for _ in range(7)]
    assert constraint._proto == protos and sorted({m.group for m in rows}) == [0, 1, 2]
    monkeypatch.setenv("AOTX_MASK_LEXERS", "4")      # a later setting: start still builds none
    constraint.start()
    assert constraint._proto == protos


def test_rows_over_several_lexers_fill_the_same_masks(monkeypatch, compiler):
    """AOTX_MASK_LEXERS=2: a constraint's sequences alternate between two prototypes (each its own lexer:
    llguidance's copies share their original's), and the masks filled along one token path are those of
    rows that all share one lexer (the lexer is a cache)."""
    import numpy as np

    from kernels.token_mask import mask_words
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}}, "required": ["name"]}
    path = compiler._source.encode('{"name": "Ann"}')
    masks = {}
    for lexers in (1, 2):
        monkeypatch.setenv("AOTX_MASK_LEXERS", str(lexers))
        constraint = compiler.json_schema(schema)
        constraint._proto.clear()          # (cached by digest: start again from no prototype)
        constraint._starts[0] = 0
        constraint.prepare()
        rows = [constraint.start() for _ in range(4)]
        assert [m.group for m in rows] == [j % lexers for j in range(4)] and len(constraint._proto) == lexers
        bits = np.zeros((4, mask_words(constraint.vocab_size)), np.uint32)
        got = []
        for tok in path:
            batch.fill_rows(rows[::-1], bits)          # (not in lexer order: fill_rows orders them)
            got.append(bits.copy())
            assert all(m.consume(tok) for m in rows)
        masks[lexers] = got
    assert all(np.array_equal(a, b) for a, b in zip(masks[1], masks[2]))
