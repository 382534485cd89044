import pytest

from aotx.engine.block_manager import BlockManager, OutOfPages, pages_for


def test_pages_for():
    assert [pages_for(n, 16) for n in (0, 1, 16, 17, 32, 33)] == [0, 1, 1, 2, 2, 3]


def test_allocate_and_free_round_trip():
    bm = BlockManager(num_pages=8, page_size=4)
    assert bm.ensure_capacity(1, 5) == [0, 1]
    assert bm.ensure_capacity(2, 4) == [2]
    assert bm.ensure_capacity(1, 8) == []            # already covered
    assert bm.pages_in_use == 3 and bm.free_pages == 5
    assert bm.free(1) == 2
    assert bm.pages_in_use == 1 and bm.block_table(1) == []
    assert bm.free(1) == 0                           # idempotent
    assert sorted(bm.ensure_capacity(3, 28)) == [0, 1, 3, 4, 5, 6, 7]
    assert bm.free_pages == 0


def test_exhaustion_allocates_nothing():
    bm = BlockManager(num_pages=3, page_size=4)
    bm.ensure_capacity(1, 8)
    with pytest.raises(OutOfPages):
        bm.ensure_capacity(2, 9)
    assert bm.pages_in_use == 2 and bm.block_table(2) == []
    with pytest.raises(OutOfPages):
        bm.ensure_capacity(1, 13)
    assert bm.block_table(1) == [0, 1]


def test_slot_mapping_crosses_page_boundaries():
    bm = BlockManager(num_pages=8, page_size=4)
    bm.ensure_capacity(7, 1)          # page 0 to seq 7
    bm.ensure_capacity(9, 4)          # page 1 to seq 9
    bm.ensure_capacity(7, 10)         # pages 2, 3 to seq 7
    assert bm.block_table(7) == [0, 2, 3]
    assert bm.slot_mapping(7, 2, 10) == [2, 3, 8, 9, 10, 11, 12, 13]
    assert bm.slot_mapping(9, 0, 4) == [4, 5, 6, 7]
    with pytest.raises(IndexError):
        bm.slot(7, 12)


def test_append_slot_grows_one_page_at_a_time():
    bm = BlockManager(num_pages=4, page_size=2)
    slots = [bm.append_slot(1, p) for p in range(5)]
    assert slots == [0, 1, 2, 3, 4]
    assert bm.pages_in_use == 3 and bm.capacity(1) == 6
