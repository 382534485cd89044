"""Frames between the engine and its matcher processes (aotx.structured.proc_wire): an in-memory
pipe format between processes of one install, never stored (so no golden bytes): a u32 length and a
pickle; a closed pipe and a deadline are told apart."""
from __future__ import annotations

import os
import struct
import threading
import time

import pytest

from aotx.structured.proc_wire import PeerGone, read_frame, write_frame


def test_a_frame_round_trips_and_is_length_prefixed():
    r, w = os.pipe()
    try:
        frame = ("step", 7, "seg", [1, 2, 3], [(5, "digest")], b"\x00\xff")
        write_frame(w, frame)
        head = os.read(r, 4)
        (n,) = struct.unpack("<I", head)
        body = os.read(r, n)
        assert len(body) == n
        os.write(w, head + body)                 # the same bytes again, read as a frame
        assert read_frame(r, time.monotonic() + 5) == frame
    finally:
        os.close(r)
        os.close(w)


def test_a_large_frame_crosses_the_pipe_buffer():
    r, w = os.pipe()
    big = ("tokenizer", "x" * 3_000_000)
    out = []
    reader = threading.Thread(target=lambda: out.append(read_frame(r, time.monotonic() + 30)))
    reader.start()
    try:
        write_frame(w, big)
        reader.join(30)
        assert out == [big]
    finally:
        os.close(r)
        os.close(w)


def test_a_closed_pipe_is_peer_gone_and_a_silent_one_times_out():
    r, w = os.pipe()
    with pytest.raises(TimeoutError):
        read_frame(r, time.monotonic() + 0.05)
    os.close(w)
    with pytest.raises(PeerGone):
        read_frame(r, time.monotonic() + 5)
    os.close(r)
    r, w = os.pipe()
    os.close(r)
    with pytest.raises(PeerGone):
        write_frame(w, ("step", 1))
    os.close(w)
