"""kernels.cuda.launch_args: every value reads back from the pointer array at its C type, structures are
passed where they lie, and a thread's reused buffer never leaks into another thread's launch."""
import ctypes
import threading

import pytest

from kernels.cuda import launch_args


class Pair(ctypes.Structure):
    """A by-value structure argument (as launchers.Epi; not imported: that loads the CUDA driver module)."""
    _fields_ = [("ptr", ctypes.c_uint64), ("mode", ctypes.c_int32)]


def _read(addr, sig):
    ptrs = (ctypes.c_void_p * len(sig)).from_address(addr)
    ct = {"p": ctypes.c_uint64, "i": ctypes.c_int32, "f": ctypes.c_float}
    return [ptrs[i] if c == "s" else ct[c].from_address(ptrs[i]).value for i, c in enumerate(sig)]


def test_values_read_back_at_their_types():
    e = Pair(1 << 33, 0)
    sig = "pippfpiiis"
    args = (1 << 40, -3, 2**64 - 8, 4, 0.5, 0, 960, 576, 2**31 - 1, e)
    got = _read(launch_args.pack(sig, args), sig)
    assert got[:9] == [1 << 40, -3, 2**64 - 8, 4, 0.5, 0, 960, 576, 2**31 - 1]
    assert got[9] == ctypes.addressof(e)
    # the same signature again: the same buffer, the new values
    got = _read(launch_args.pack(sig, (7, 1, 8, 9, 2.0, 10, 1, 2, 3, Pair(5, 1))), sig)
    assert got[:9] == [7, 1, 8, 9, 2.0, 10, 1, 2, 3]


def test_bad_values_and_codes_are_refused():
    with pytest.raises(ValueError, match="unknown argument codes"):
        launch_args.pack("px", (1, 2))
    with pytest.raises(Exception):      # struct.error: out of int32's range, not a silent wrap
        launch_args.pack("i", (2**31,))


def test_each_thread_has_its_own_buffer():
    """Both threads pack before either reads back (a barrier keeps both buffers alive at once)."""
    seen = {}
    both_packed = threading.Barrier(2)

    def run(name, value):
        addr = launch_args.pack("pi", (value, value))
        both_packed.wait(timeout=30)
        seen[name] = (addr, _read(addr, "pi"))

    threads = [threading.Thread(target=run, args=(n, v)) for n, v in (("a", 11), ("b", 22))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["a"][0] != seen["b"][0]
    assert seen["a"][1] == [11, 11] and seen["b"][1] == [22, 22]
