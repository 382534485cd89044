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
