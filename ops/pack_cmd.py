"""`aotx pack --runtime FILE --shared`: write the runtime file or add/upgrade its shared profile."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from aotx.runtime_file import RuntimeFileError, pack_shared, read_runtime_file
from aotx.state import Capacities, StateError

_CAPS = [f.name for f in dataclasses.fields(Capacities)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", required=True, help="the runtime file to write or upgrade")
    p.add_argument("--shared", action="store_true", help="require and write the shared profile")
    p.add_argument("--name", help="runtime name (NATS subject token; default main, or the file's)")
    p.add_argument("--stream", help="journal stream name (default AOTX_JOURNAL, or the file's)")
    p.add_argument("--subject-prefix", help="journal subject prefix (default aotx.j, or the file's)")
    for name in _CAPS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"capacity: {name}")


def run(args: argparse.Namespace) -> int:
    if not args.shared:
        print("aotx pack: nothing to pack; pass --shared (the only profile this aotx writes)", file=sys.stderr)
        return 2
    given = {n: getattr(args, n) for n in _CAPS if getattr(args, n) is not None}
    try:
        caps = None
        if given:
            base = read_runtime_file(args.runtime).capacities() if _has_shared(args.runtime) else Capacities()
            caps = dataclasses.replace(base, **given)
        rf, changed = pack_shared(args.runtime, name=args.name, capacities=caps, stream_name=args.stream,
                                  subject_prefix=args.subject_prefix)
    except (RuntimeFileError, StateError) as exc:
        print(f"aotx pack: {exc}", file=sys.stderr)
        return 1
    print(f"aotx pack: {rf.path} {'written' if changed else 'unchanged (already compatible)'}; "
          f"runtime {rf.name}, required profiles: {', '.join(rf.required_profiles)}", file=sys.stderr)
    return 0


def _has_shared(path: str) -> bool:
    try:
        return read_runtime_file(path).shared
    except RuntimeFileError:
        return False
