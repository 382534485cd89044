"""What `aotx serve` and `aotx boot` share: the runtime file, fresh grants and a booted runtime."""
from __future__ import annotations

from typing import Any

from aotx.runtime import GrantedRuntime, SharedRuntime
from aotx.runtime_file import GrantFile, RuntimeFile, RuntimeFileError
from eventlog import NatsAuth, StreamSpec


def require_shared(rf: RuntimeFile) -> None:
    if not rf.shared:
        raise RuntimeFileError(f"runtime file {rf.path}: the shared profile is not required by this file; "
                               f"add it with `aotx pack --runtime {rf.path} --shared`")


def stream_spec(rf: RuntimeFile) -> StreamSpec:
    name, prefix = rf.stream()
    return StreamSpec(name=name, subject_prefix=prefix)


def boot_summary(runtime: SharedRuntime) -> str:
    """How the runtime booted, for the ready line: from a snapshot + a tail, or by full replay."""
    proj, keeper = runtime.projector, runtime.snapshots
    start = None if keeper is None else keeper.stats.booted_from
    if proj is None:
        return "not booted"
    if start is None:
        return f"booted by full replay of {proj.messages} journal messages"
    return f"booted from snapshot at seq {start} + {keeper.stats.tail} tail messages"


def granted_runtime(rf: RuntimeFile, nats_url: str, grants: GrantFile, *, progress: bool = True,
                    nats_auth: NatsAuth | None = None, **options: Any) -> GrantedRuntime:
    """Not started yet: `await it.start()` connects and boots by journal replay (with a progress bar).
    `options`: SharedRuntime's constructor options (ops.model_args.runtime_options: execution deadline,
    retention mode, lease revision, automatic-memory qualification)."""
    require_shared(rf)
    runtime = SharedRuntime(nats_url, stream_spec(rf), rf.capacities(), progress=progress, nats_auth=nats_auth,
                            **options)
    return GrantedRuntime(runtime, grants)
