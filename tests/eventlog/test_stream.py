"""Stream settings and subject names."""

from __future__ import annotations

import pytest
from nats.js.api import DiscardPolicy, StorageType

from eventlog import StreamSpec, journal_subject


def test_subjects():
    assert journal_subject("0123abcd", "tick") == "aotx.j.0123abcd.tick"
    for bad in ("a.b", "*", ">", "", "a b"):
        with pytest.raises(ValueError):
            journal_subject(bad, "tick")


def test_stream_config():
    cfg = StreamSpec(max_bytes=1 << 20, duplicate_window_s=30).config()
    assert cfg.name == "AOTX_JOURNAL" and cfg.subjects == ["aotx.j.>"]
    assert cfg.storage == StorageType.FILE and cfg.discard == DiscardPolicy.NEW
    assert cfg.max_bytes == 1 << 20 and cfg.duplicate_window == 30 and cfg.allow_direct is True
    assert StreamSpec().config().max_bytes == -1
