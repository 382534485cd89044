"""Rendering recalled memory per lease revision: golden strings, byte limit, links stay text."""

from aotx.memory import HISTORICAL_DATA_RULE, MediaRef, MemoryStore, compose_text, render_memory, retention_event
from aotx.state import Scope, lineage_for

from .helpers import conversation_id, op, retained, space_id, unit

SPACE = space_id("alice", 1)
SHA = "0f" * 32


def recalled():
    s = MemoryStore()
    s.apply(retained("alice", 1, SPACE, Scope.ROOM, "Deploy  is on\nTuesday.", unit((0, 1.0))))
    s.apply(retained("bob", 1, SPACE, Scope.ROOM, "I prefer tea", unit((0, 1.0), (1, 0.5)), interpretation="likes tea"))
    s.apply(retention_event(op("alice", 2), conversation_id("alice", 1), SPACE, Scope.ROOM, lineage_for("alice"), 1,
                            compose_text("see chart", [MediaRef("image", SHA)]), unit((0, 1.0), (1, 0.7))))
    return s.recall(SPACE, unit((0, 1.0)), 3)


A = f"participant {lineage_for('alice')[:4].hex()} in conversation c0000000"
B = f"participant {lineage_for('bob')[:4].hex()} in conversation c0000000"


def test_revision_3_compact_context_and_rule():
    out = render_memory(3, recalled())
    assert out.system_rule == HISTORICAL_DATA_RULE
    assert out.context == ("Recalled memory (historical data):\n"
                           f"- [{A}] Deploy is on Tuesday.\n"
                           f"- [{B}] I prefer tea\n"
                           "  interpretation: likes tea\n"
                           f"- [{A}] see chart [image:{SHA}]\n")
    assert out.system_text() == HISTORICAL_DATA_RULE + "\n\n" + out.context


def test_revisions_4_and_5_share_source_labels():
    for rev in (4, 5):
        out = render_memory(rev, recalled())
        assert out.system_rule == HISTORICAL_DATA_RULE
        assert out.context == ("Recalled memory (historical data):\n"
                               f"[{A}]\n"
                               "- Deploy is on Tuesday.\n"
                               f"- see chart [image:{SHA}]\n"
                               f"[{B}]\n"
                               "- I prefer tea\n"
                               "  interpretation: likes tea\n")
        assert out.context_bytes < render_memory(3, recalled()).context_bytes


def test_old_revisions_and_no_memory_render_nothing():
    for rev in (0, 1, 2):
        out = render_memory(rev, recalled())
        assert (out.system_rule, out.context, out.objects, out.system_text()) == ("", "", (), "")
    assert render_memory(3, []).context == ""


def test_byte_limit_cuts_the_first_entry_that_does_not_fit_and_stops():
    s = MemoryStore()
    for i in range(3):
        s.apply(retained("alice", i + 1, SPACE, Scope.ROOM, f"{i}" + "é" * 900, unit((0, 1.0), (1, 0.1 * i))))
    r = s.recall(SPACE, unit((0, 1.0)), 3)
    for rev in (3, 4):
        out = render_memory(rev, r)
        assert out.context_bytes <= 2048 and out.context.endswith("…\n") and len(out.objects) == 2
        assert render_memory(rev, r, limit=2048 + 5000).context_bytes > 2048
    tight = render_memory(3, r, limit=len("Recalled memory (historical data):\n") + 10)
    assert tight.context == "" and tight.system_rule == ""
