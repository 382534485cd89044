"""The one module that talks to the CUDA driver (``cuda.bindings.driver``): context, memory,
copies, modules, launches and graphs. Import it only after ``probe.gpu_present()`` said yes.

Every driver call goes through ``check``. Kernel arguments are packed from a signature string
(``p`` pointer, ``i`` int32, ``f`` float32, ``s`` a ctypes Structure instance) by kernels.cuda.launch_args.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
from cuda.bindings import driver as cu

from kernels.cuda import launch_args


class CudaError(RuntimeError):
    pass


_SUCCESS = cu.CUresult.CUDA_SUCCESS


def check(result):
    err = result[0] if type(result) is tuple else result
    if err is not _SUCCESS and err != _SUCCESS:     # (identity first: an enum's != costs ~1 µs)
        _, name = cu.cuGetErrorName(err)
        _, text = cu.cuGetErrorString(err)
        raise CudaError(f"{name.decode() if name else err}: {text.decode() if text else ''}")
    if type(result) is tuple:
        rest = result[1:]
        return rest[0] if len(rest) == 1 else (rest or None)
    return None


# AOTX_CUDA_SCHED: the primary context's scheduling flags. "auto" (the driver's default: spin while the host has
# more CPUs than active contexts) leaves them; "spin", "yield" and "blocking" (the waiting thread sleeps until the
# device signals: no CPU burnt in waits, some µs of wake-up latency) set them before the context is made.
_SCHED = {"auto": 0, "spin": int(cu.CUctx_flags.CU_CTX_SCHED_SPIN), "yield": int(cu.CUctx_flags.CU_CTX_SCHED_YIELD),
          "blocking": int(cu.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC)}


class Device:
    """The primary context of one GPU and one stream; ``make_current`` before use on any thread."""

    def __init__(self, ordinal: int = 0):
        sched = _SCHED.get(os.environ.get("AOTX_CUDA_SCHED", "auto"))
        if sched is None:
            raise ValueError(f"AOTX_CUDA_SCHED must be one of {', '.join(_SCHED)}")
        check(cu.cuInit(0))
        self.dev = check(cu.cuDeviceGet(ordinal))
        if sched:   # how a host thread waits for the device (cuEventSynchronize, cuStreamSynchronize)
            check(cu.cuDevicePrimaryCtxSetFlags(self.dev, sched))
        self.ctx = check(cu.cuDevicePrimaryCtxRetain(self.dev))
        self.make_current()
        major = check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev))
        minor = check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev))
        self.arch = f"sm_{major}{minor}"
        self.sm_count = check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.dev))
        self.name = check(cu.cuDeviceGetName(64, self.dev)).split(b"\0")[0].decode()
        self.stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))

    def make_current(self) -> None:
        check(cu.cuCtxSetCurrent(self.ctx))

    def synchronize(self) -> None:
        check(cu.cuStreamSynchronize(self.stream))


def mem_free() -> int:
    """Bytes of device memory free now (the current context's device)."""
    free, _total = check(cu.cuMemGetInfo())
    return int(free)


class Buffer:
    """Plain device memory (cuMemAlloc). ``ptr`` is an int; ``ptr + offset`` addresses inside."""

    def __init__(self, nbytes: int):
        self.nbytes = max(int(nbytes), 16)
        self.ptr = int(check(cu.cuMemAlloc(self.nbytes)))

    def free(self) -> None:
        if self.ptr:
            check(cu.cuMemFree(self.ptr))
            self.ptr = 0


def htod(dst: int, host: np.ndarray, stream) -> None:
    host = np.ascontiguousarray(host)
    if host.nbytes:
        check(cu.cuMemcpyHtoDAsync(dst, host.ctypes.data, host.nbytes, stream))


def dtoh(host: np.ndarray, src: int, stream) -> np.ndarray:
    """Copy into ``host`` (C-contiguous) and wait for it."""
    if host.nbytes:
        check(cu.cuMemcpyDtoHAsync(host.ctypes.data, src, host.nbytes, stream))
    check(cu.cuStreamSynchronize(stream))
    return host


def memset0(dst: int, nbytes: int, stream) -> None:
    check(cu.cuMemsetD8Async(dst, 0, nbytes, stream))


class Module:
    def __init__(self, cubin: bytes):
        self._data = cubin
        self.handle = check(cu.cuModuleLoadData(cubin))
        self._funcs: dict[str, object] = {}

    def function(self, name: str):
        if name not in self._funcs:
            self._funcs[name] = check(cu.cuModuleGetFunction(self.handle, name.encode()))
        return self._funcs[name]


# Programmatic dependent launch: a kernel may start while its predecessor on the stream finishes
# (the kernels wait with griddepcontrol.wait before touching activations). Callers ask for it per
# launch; AOTX_CUDA_PDL=0 turns it off everywhere.
PDL = os.environ.get("AOTX_CUDA_PDL", "1") != "0"
_local = threading.local()


def _pdl_config():
    """This thread's launch config carrying the PDL attribute (built once: a CUlaunchAttribute costs
    ~10 µs to make); launch() sets its dimensions, shared memory and stream."""
    cfg = getattr(_local, "pdl_cfg", None)
    if cfg is None:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        cfg = _local.pdl_cfg = cu.CUlaunchConfig()
        cfg.attrs = [attr]
        cfg.numAttrs = 1
    return cfg


def launch(func, grid, block, args, sig: str, stream, smem: int = 0, pdl: bool = False) -> None:
    """Launch ``func`` with ``args`` packed by ``sig`` (``p`` pointer, ``i`` int32, ``f`` float32, ``s`` a
    ctypes Structure passed by value): kernels.cuda.launch_args."""
    params = launch_args.pack(sig, args)
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    if not (pdl and PDL):
        check(cu.cuLaunchKernel(func, gx, gy, gz, block, 1, 1, smem, stream, params, 0))
        return
    cfg = _pdl_config()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block, 1, 1
    cfg.sharedMemBytes = smem
    cfg.hStream = stream
    check(cu.cuLaunchKernelEx(cfg, func, params, 0))


def max_active_blocks(func, threads: int, smem: int = 0) -> int:
    """Blocks of ``func`` one multiprocessor holds at once (the occupancy calculator)."""
    return int(check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, threads, smem)))


def set_max_dynamic_smem(func, nbytes: int) -> None:
    check(cu.cuFuncSetAttribute(
        func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes))


class Graph:
    """A captured sequence of launches on ``stream``, replayed with ``launch``."""

    def __init__(self, stream, record):
        check(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        try:
            record()
        finally:
            graph = check(cu.cuStreamEndCapture(stream))
        self.graph = graph
        self.exec = check(cu.cuGraphInstantiate(graph, 0))

    def launch(self, stream) -> None:
        check(cu.cuGraphLaunch(self.exec, stream))

    def destroy(self) -> None:
        """Free the graph and its executable (the caller makes sure no launch of it is still pending)."""
        if self.exec is not None:
            check(cu.cuGraphExecDestroy(self.exec))
            check(cu.cuGraphDestroy(self.graph))
            self.exec = self.graph = None


class Timer:
    """CUDA events around a region on ``stream``: ``ms()`` after ``stop``."""

    def __init__(self):
        self.a = check(cu.cuEventCreate(0))
        self.b = check(cu.cuEventCreate(0))

    def start(self, stream) -> None:
        check(cu.cuEventRecord(self.a, stream))

    def stop(self, stream) -> float:
        check(cu.cuEventRecord(self.b, stream))
        check(cu.cuEventSynchronize(self.b))
        return float(check(cu.cuEventElapsedTime(self.a, self.b)))


# -- the pieces of an overlapped step (kernels.cuda.overlap) ---------------------------------------
class Pinned:
    """Page-locked host memory (cuMemHostAlloc): async copies from/to it never wait for the stream.
    ``view(dtype, n, offset)`` is a numpy array over part of it."""

    def __init__(self, nbytes: int):
        self.nbytes = max(int(nbytes), 64)
        self.ptr = int(check(cu.cuMemHostAlloc(self.nbytes, 0)))
        self._raw = (ctypes.c_uint8 * self.nbytes).from_address(self.ptr)

    def view(self, dtype, n: int, offset: int = 0) -> np.ndarray:
        dtype = np.dtype(dtype)
        if offset + n * dtype.itemsize > self.nbytes:
            raise ValueError(f"{n} x {dtype} at {offset} exceeds the {self.nbytes}-byte pinned buffer")
        return np.frombuffer(self._raw, dtype=dtype, count=n, offset=offset)

    def free(self) -> None:
        if self.ptr:
            check(cu.cuMemFreeHost(self.ptr))
            self.ptr, self._raw = 0, None


class Event:
    """A CUDA event on the stream; ``timing`` ones give elapsed milliseconds between two."""

    def __init__(self, timing: bool = False):
        flags = 0 if timing else int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        self.handle = check(cu.cuEventCreate(flags))

    def record(self, stream) -> None:
        check(cu.cuEventRecord(self.handle, stream))

    def synchronize(self) -> None:
        check(cu.cuEventSynchronize(self.handle))

    def since(self, earlier: "Event") -> float:
        """Milliseconds from ``earlier`` to this event (both recorded and complete)."""
        return float(check(cu.cuEventElapsedTime(earlier.handle, self.handle)))


def htod_pinned(dst: int, src: int, nbytes: int, stream) -> None:
    """Async copy from pinned host memory at ``src`` (an address) to the device."""
    if nbytes:
        check(cu.cuMemcpyHtoDAsync(dst, src, nbytes, stream))


def dtoh_async(dst: int, src: int, nbytes: int, stream) -> None:
    """Async copy to pinned host memory at ``dst`` (an address); wait on an event recorded after it."""
    if nbytes:
        check(cu.cuMemcpyDtoHAsync(dst, src, nbytes, stream))


def dtod(dst: int, src: int, nbytes: int, stream) -> None:
    if nbytes:
        check(cu.cuMemcpyDtoDAsync(dst, src, nbytes, stream))


class HostWord:
    """A uint32 counter in page-locked, device-mapped host memory that a stream can wait on
    (``cuStreamWaitValue32``, cyclic >=): the host raises it with a plain store (``open``: no driver
    call, so no GIL hand-over), and work queued behind ``wait`` starts microseconds later."""

    def __init__(self) -> None:
        flags = int(cu.CU_MEMHOSTALLOC_DEVICEMAP) | int(cu.CU_MEMHOSTALLOC_PORTABLE)
        self.ptr = int(check(cu.cuMemHostAlloc(64, flags)))
        self.dptr = int(check(cu.cuMemHostGetDevicePointer(self.ptr, 0)))
        self._word = np.frombuffer((ctypes.c_uint8 * 64).from_address(self.ptr), dtype=np.uint32, count=1)
        self._word[0] = 0

    @property
    def value(self) -> int:
        return int(self._word[0])

    def wait(self, stream, value: int) -> None:
        """Work enqueued after this on ``stream`` waits until the word is >= ``value`` (cyclic)."""
        check(cu.cuStreamWaitValue32(stream, self.dptr, value & 0xFFFFFFFF,
                                     int(cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)))

    def open(self, value: int) -> None:
        self._word[0] = value & 0xFFFFFFFF

    def free(self) -> None:
        if self.ptr:
            check(cu.cuMemFreeHost(self.ptr))
            self.ptr, self._word = 0, None
