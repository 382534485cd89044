"""Compiler: CUDA C source -> cubin through NVRTC (``cuda.core.Program``), cached on disk.

A pure function of (source text of the family and every header it includes, options, arch,
NVRTC version), so the cache key is a hash of exactly those. Touches no driver: it runs (and CI
runs it) on machines without a GPU. Errors carry NVRTC's full compile log.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent
FAMILIES = ("embedding", "norm", "rope", "kv_write", "swiglu", "linear", "attention", "sampling", "fused",
            "attn_fused", "token_mask", "flash_attention", "linear_wgmma", "lean", "lean_mlp",
            "decode_attention")
# Families that use arch-specific instructions (wgmma): compiled for the "a" target of the arch asked for.
ARCH_SPECIFIC = ("linear_wgmma",)
# Families a Kernels object loads only when asked (kernels.cuda.wgmma_plan): compile_all skips them.
ON_DEMAND = ("linear_wgmma",)
ENV_CACHE_DIR = "AOTX_KERNEL_CACHE"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


class CompileError(RuntimeError):
    """NVRTC refused a source; the message holds the whole compile log."""


@dataclass(frozen=True)
class Cubin:
    family: str
    arch: str
    data: bytes
    key: str
    cached: bool


def cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "aotx" / "cubin"


def cuda_include_dir() -> Path:
    """The CUDA headers NVRTC needs (``cuda_bf16.h``): the pip ``nvidia/cu13/include`` if present."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else []):
        for sub in ("cu13/include", "cuda_runtime/include", "cuda_nvrtc/include"):
            cand = Path(root) / sub
            if (cand / "cuda_bf16.h").exists():
                return cand
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and (Path(os.environ[env]) / "include" / "cuda_bf16.h").exists():
            return Path(os.environ[env]) / "include"
    if Path("/usr/local/cuda/include/cuda_bf16.h").exists():
        return Path("/usr/local/cuda/include")
    raise CompileError("no CUDA headers found: install `cuda-toolkit[nvrtc,cudart]==13.*` "
                       "(site-packages/nvidia/cu13/include) or set CUDA_HOME")


def source_closure(family: str) -> str:
    """The family's source followed by every local header it includes (recursively, once each)."""
    seen: list[str] = []

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.append(name)
        for inc in _INCLUDE.findall((SOURCE_DIR / name).read_text()):
            if (SOURCE_DIR / inc).exists():
                visit(inc)

    visit(f"{family}.cu")
    return "".join(f"// ---- {n}\n{(SOURCE_DIR / n).read_text()}" for n in seen)


def family_arch(family: str, arch: str) -> str:
    """The target ``family`` compiles for: ``sm_90`` -> ``sm_90a`` for the arch-specific families."""
    return arch + "a" if family in ARCH_SPECIFIC and arch.startswith("sm_9") and not arch.endswith("a") else arch


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _options(name: str, arch: str, defines: dict[str, int]):
    from cuda.core import ProgramOptions

    return ProgramOptions(
        name=name, arch=arch, std="c++17", include_path=[str(SOURCE_DIR), str(cuda_include_dir())],
        define_macro=[(k, str(v)) for k, v in sorted(defines.items())] or None, lineinfo=True,
    )


def compile_family(family: str, arch: str = "sm_90", defines: dict[str, int] | None = None,
                   use_cache: bool = True) -> Cubin:
    """The cubin of ``kernels/cuda/<family>.cu`` for ``arch`` (e.g. ``"sm_90"``)."""
    from cuda.core import Program

    defines = dict(defines or {})
    arch = family_arch(family, arch)
    source = (SOURCE_DIR / f"{family}.cu").read_text()
    opts = _options(f"{family}.cu", arch, defines)
    key = hashlib.sha256("\0".join([source_closure(family), repr(sorted(defines.items())), arch,
                                    nvrtc_version(), "std=c++17 lineinfo"]).encode()).hexdigest()[:32]
    path = cache_dir() / f"{family}-{arch}-{key}.cubin"
    if use_cache and path.exists():
        return Cubin(family, arch, path.read_bytes(), key, True)
    prog = Program(source, code_type="c++", options=opts)
    try:
        obj = prog.compile("cubin")
    except Exception as exc:  # cuda.core raises with NVRTC's log in the message
        raise CompileError(f"NVRTC failed on {family}.cu for {arch}:\n{exc}") from exc
    finally:
        prog.close()
    data = bytes(obj.code)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return Cubin(family, arch, data, key, False)


def compile_all(arch: str = "sm_90", defines: dict[str, int] | None = None,
                use_cache: bool = True) -> dict[str, Cubin]:
    return {f: compile_family(f, arch, defines, use_cache) for f in FAMILIES if f not in ON_DEMAND}


def ptxas_report(family: str, arch: str = "sm_90", defines: dict[str, int] | None = None,
                 with_cubin: bool = False):
    """ptxas's resource report (registers, shared memory, stack frame, spills per kernel) of one
    family, through NVRTC with ``--ptxas-options=-v`` (no GPU, no cache): CI asserts on it.
    ``with_cubin``: (report, the cubin of the same compile)."""
    from cuda.bindings import nvrtc

    arch = family_arch(family, arch)
    src = (SOURCE_DIR / f"{family}.cu").read_bytes()
    _, prog = nvrtc.nvrtcCreateProgram(src, f"{family}.cu".encode(), 0, [], [])
    opts = [f"-arch={arch}".encode(), b"-std=c++17", f"-I{SOURCE_DIR}".encode(), f"-I{cuda_include_dir()}".encode(),
            b"--ptxas-options=-v"] + [f"-D{k}={v}".encode() for k, v in sorted((defines or {}).items())]
    try:
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(max(n, 2))  # never b" " * n: NVRTC would write into a shared bytes object
        nvrtc.nvrtcGetProgramLog(prog, log)
        cubin = b""
        if with_cubin and res == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            buf = bytearray(max(size, 2))
            nvrtc.nvrtcGetCUBIN(prog, buf)
            cubin = bytes(buf[:size])
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    text = log.rstrip(b"\0").decode(errors="replace")
    if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC failed on {family}.cu for {arch}:\n{text}")
    return (text, cubin) if with_cubin else text
