"""The runtime file: canonical JSON naming the runtime, its required profiles and their settings.

    {"components": {...}, "format": "aotx.runtime", "name": "main",
     "profiles": {"shared": {"capacities": {...}, "stream": {"name": ..., "subject_prefix": ...},
                             "version": 1}},
     "required_profiles": ["shared"], "version": 1}

A reader refuses a file of another format or a newer format version, and any *required* profile it
does not know (or knows only in an older version). `components` holds the extents of other runtime
components; the packer keeps them as they are. Credentials never enter this file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..state import Capacities, StateError
from .canonical import canonical_bytes, write_atomic
from .errors import RuntimeFileError

FORMAT = "aotx.runtime"
FORMAT_VERSION = 1
SHARED_PROFILE = "shared"
SHARED_PROFILE_VERSION = 1
KNOWN_PROFILES: Mapping[str, int] = {SHARED_PROFILE: SHARED_PROFILE_VERSION}
DEFAULT_NAME = "main"
DEFAULT_STREAM = {"name": "AOTX_JOURNAL", "subject_prefix": "aotx.j"}
_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOP_KEYS = {"format", "version", "name", "required_profiles", "profiles", "components"}


@dataclass(frozen=True)
class RuntimeFile:
    path: Path
    name: str
    required_profiles: tuple[str, ...]
    profiles: Mapping[str, Mapping[str, Any]]
    components: Mapping[str, Any]

    @property
    def shared(self) -> bool:
        return SHARED_PROFILE in self.required_profiles

    def capacities(self) -> Capacities:
        return Capacities(**self.profiles[SHARED_PROFILE]["capacities"])

    def stream(self) -> tuple[str, str]:
        s = self.profiles[SHARED_PROFILE]["stream"]
        return s["name"], s["subject_prefix"]

    def doc(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, "name": self.name,
                "required_profiles": list(self.required_profiles),
                "profiles": {k: dict(v) for k, v in self.profiles.items()}, "components": dict(self.components)}


def _fail(path: Path, why: str) -> RuntimeFileError:
    return RuntimeFileError(f"runtime file {path}: {why}")


def _check_shared(path: Path, profile: Any) -> None:
    if not isinstance(profile, dict) or set(profile) != {"version", "capacities", "stream"}:
        raise _fail(path, "the shared profile must hold exactly version, capacities and stream")
    caps = profile["capacities"]
    names = {f.name for f in dataclasses.fields(Capacities)}
    if not isinstance(caps, dict) or set(caps) != names:
        raise _fail(path, f"shared profile capacities must name exactly {sorted(names)}")
    try:
        Capacities(**caps)
    except StateError as exc:
        raise _fail(path, f"shared profile: {exc}") from None
    stream = profile["stream"]
    if (not isinstance(stream, dict) or set(stream) != {"name", "subject_prefix"}
            or not all(isinstance(v, str) and v for v in stream.values())):
        raise _fail(path, "shared profile stream must hold nonempty name and subject_prefix")


def _parse(path: Path, raw: bytes) -> RuntimeFile:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail(path, f"not canonical JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _fail(path, f"format is not {FORMAT!r}")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise _fail(path, f"format version must be a positive integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise _fail(path, f"format version {version} is newer than this reader's {FORMAT_VERSION}")
    if set(doc) != _TOP_KEYS:
        raise _fail(path, f"top-level keys must be exactly {sorted(_TOP_KEYS)}, got {sorted(doc)}")
    name = doc["name"]
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise _fail(path, f"name must be 1-64 of [A-Za-z0-9_-], got {name!r}")
    required, profiles, components = doc["required_profiles"], doc["profiles"], doc["components"]
    if (not isinstance(required, list) or not all(isinstance(p, str) for p in required)
            or required != sorted(set(required))):
        raise _fail(path, "required_profiles must be a sorted list of distinct strings")
    if not isinstance(profiles, dict) or not isinstance(components, dict):
        raise _fail(path, "profiles and components must be objects")
    for p in required:
        known = KNOWN_PROFILES.get(p)
        if known is None:
            raise _fail(path, f"requires profile {p!r}, which this reader does not know "
                              f"(known: {', '.join(sorted(KNOWN_PROFILES))}); use a newer aotx")
        profile = profiles.get(p)
        if not isinstance(profile, dict):
            raise _fail(path, f"requires profile {p!r} but does not contain it")
        pv = profile.get("version")
        if type(pv) is not int or pv < 1:
            raise _fail(path, f"profile {p!r} version must be a positive integer, got {pv!r}")
        if pv > known:
            raise _fail(path, f"requires profile {p!r} version {pv}; this reader knows up to version {known}")
    if SHARED_PROFILE in profiles:
        _check_shared(path, profiles[SHARED_PROFILE])
    return RuntimeFile(path, name, tuple(required), profiles, components)


def read_runtime_file(path: str | Path) -> RuntimeFile:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _fail(path, "does not exist; create it with `aotx pack --runtime FILE --shared`") from None
    return _parse(path, raw)


def pack_shared(path: str | Path, *, name: str | None = None, capacities: Capacities | None = None,
                stream_name: str | None = None, subject_prefix: str | None = None) -> tuple[RuntimeFile, bool]:
    """Write the file, or add/upgrade its shared profile; (the file, whether its bytes changed).

    A file whose shared profile is already current and matches the options stays byte-identical
    (it is not rewritten at all). Components are kept as they are.
    """
    path = Path(path)
    old = path.read_bytes() if path.exists() else None
    if old is None:
        current = RuntimeFile(path, name or DEFAULT_NAME, (), {}, {})
    else:
        current = _parse(path, old)
    if name is not None and not _TOKEN.fullmatch(name):
        raise _fail(path, f"name must be 1-64 of [A-Za-z0-9_-], got {name!r}")
    existing = current.profiles.get(SHARED_PROFILE)
    caps = dataclasses.asdict(capacities) if capacities is not None else (
        dict(existing["capacities"]) if existing else dataclasses.asdict(Capacities()))
    stream = dict(existing["stream"]) if existing else dict(DEFAULT_STREAM)
    if stream_name is not None:
        stream["name"] = stream_name
    if subject_prefix is not None:
        stream["subject_prefix"] = subject_prefix
    profiles = dict(current.profiles)
    profiles[SHARED_PROFILE] = {"version": SHARED_PROFILE_VERSION, "capacities": caps, "stream": stream}
    required = tuple(sorted(set(current.required_profiles) | {SHARED_PROFILE}))
    packed = RuntimeFile(path, name or current.name, required, profiles, current.components)
    data = canonical_bytes(packed.doc())
    _check_shared(path, profiles[SHARED_PROFILE])
    if data == old:
        return current, False
    write_atomic(path, data)
    return _parse(path, data), True
