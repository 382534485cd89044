"""CPU side of flash_prefill (no GPU): which steps take it, and its query tiles (kernels/cuda/flash_plan.py)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.cuda import flash_plan


def _step(seqs):
    """seqs: (context length, query tokens) per sequence -> query_start, positions, context_lens."""
    nq = np.array([n for _, n in seqs])
    qs = np.concatenate([[0], np.cumsum(nq)]).astype(np.int32)
    pos = np.concatenate([np.arange(ln - n, ln) for ln, n in seqs] or [[]]).astype(np.int32)
    return qs, pos, np.array([ln for ln, _ in seqs], np.int32)


@pytest.mark.parametrize("bq", sorted({bq for bq, _ in flash_plan.VARIANTS}))
def test_tiles_cover_every_token_once_within_one_sequence(bq):
    seqs = [(1, 1), (17, 17), (5000, 1000), (77, 1), (64, 64), (300, 0), (129, 65)]
    qs, pos, ctx = _step(seqs)
    tiles = flash_plan.tiles(qs, pos, ctx, bq)
    assert tiles.dtype == np.int32 and tiles.flags.c_contiguous and tiles.shape[1] == 2
    assert sorted(int(t) for a, n in tiles for t in range(a, a + n)) == list(range(int(qs[-1])))
    seq_of = np.repeat(np.arange(len(seqs)), np.diff(qs))
    for a, n in tiles:
        assert 1 <= n <= bq and len(set(seq_of[a:a + n])) == 1
    assert len(tiles) == sum(-(-n // bq) for _, n in seqs)


def test_tiles_heaviest_first():
    qs, pos, ctx = _step([(40, 40), (1000, 1), (200, 200)])
    tiles = flash_plan.tiles(qs, pos, ctx, 16)
    last = pos[tiles[:, 0] + tiles[:, 1] - 1] + 1
    assert list(last) == sorted(last, reverse=True)
    assert tiles[0].tolist() == [40, 1]        # the decode token over 1,000 keys leads


def test_empty_step_has_no_tiles():
    assert flash_plan.tiles(np.array([0, 0]), np.zeros(0, np.int32), np.array([5]), 16).shape == (0, 2)


def test_which_steps_take_flash():
    assert flash_plan.wants_flash(np.array([0, 16]))
    assert flash_plan.wants_flash(np.array([0, 1, 2, 40]))
    assert not flash_plan.wants_flash(np.array([0, 1, 2, 3]))       # decode
    assert not flash_plan.wants_flash(np.array([0, 15, 16]))
    assert not flash_plan.wants_flash(np.array([0]))


def test_variant_by_grid_size():
    assert flash_plan.variant(np.array([0, 1024]), 3, 132) == (16, 2)    # 192 blocks of 16 tokens: two key groups
    assert flash_plan.variant(np.array([0, 2048]), 3, 132) == (16, 1)    # 384 blocks
    assert flash_plan.variant(np.arange(0, 130 * 64 + 1, 64), 3, 132) == (64, 1)   # 390 blocks of 64 tokens
    assert all(v in flash_plan.VARIANTS for v in (flash_plan.variant(np.array([0, n]), 3, 132) for n in (16, 9000)))


def test_env_switch():
    assert flash_plan.flash_enabled({}) and flash_plan.DEFAULT == "1"   # on since make gpu-check passed on an H100
    assert flash_plan.flash_enabled({"AOTX_FLASH_PREFILL": "1"})
    assert not flash_plan.flash_enabled({"AOTX_FLASH_PREFILL": "0"})
    with pytest.raises(ValueError):
        flash_plan.flash_enabled({"AOTX_FLASH_PREFILL": "yes"})
