"""ops/bench/cluster_scale.py (issue 15 part 5): each level runs on a journal of its own."""

from __future__ import annotations

import pytest

from ops.bench.cluster_scale import level_file, main


def test_every_level_has_a_journal_of_its_own(tmp_path):
    """The H200 run's level 2 booted on level 1's journal (6,878 messages, 48 more lineages holding
    receipts): 96 participants' receipts in one 1,024-row table."""
    (one, one_prefix), (two, two_prefix) = level_file(tmp_path, 1).stream(), level_file(tmp_path, 2).stream()
    assert len({one, two, "AOTX_JOURNAL"}) == 3 and len({one_prefix, two_prefix, "aotx.j"}) == 3


def test_more_participants_than_the_receipt_table_holds_are_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--participants", "65"])
    assert exc.value.code == 2 and "at most 64" in capsys.readouterr().err


def test_a_lower_retire_every_lets_more_participants_in(capsys):
    """--retire-every 8: every participant keeps at most 8 receipts, so 128 fit the 1,024-row table."""
    with pytest.raises(SystemExit) as exc:
        main(["--participants", "129", "--retire-every", "8"])
    assert exc.value.code == 2 and "at most 128" in capsys.readouterr().err
