"""kernels.cuda: the CUDA backend. One ``.cu`` file per kernel family (embedding, norm, rope,
kv_write, swiglu, linear, attention, sampling), NVRTC build with a disk cache (``build``), the one
module that calls the driver (``driver``), per-kernel launchers (``launchers``), numpy twins and bf16
packing (``twins``), and ``backend.CudaBackend``.

Importing this package touches no driver: ``probe.gpu_present`` decides from the filesystem, and
``driver`` / ``backend`` are imported only when a CUDA backend is created.
"""
from kernels.cuda.build import FAMILIES, CompileError, compile_all, compile_family
from kernels.cuda.probe import gpu_present

__all__ = ["FAMILIES", "CompileError", "compile_all", "compile_family", "gpu_present"]
