"""The runtime file: golden bytes, idempotent packing, upgrades, and refusals of unknown profiles."""
from __future__ import annotations

import json

import pytest

from aotx.runtime_file import RuntimeFileError, pack_shared, read_runtime_file
from aotx.state import Capacities
from ops.cli import main

GOLDEN = (b'{"components":{},"format":"aotx.runtime","name":"main","profiles":{"shared":{"capacities":'
          b'{"command_bytes":8192,"conversations":4096,"members":4096,"participants":1024,"receipts":1024,'
          b'"result_bytes":65536,"spaces":1024},"stream":{"name":"AOTX_JOURNAL","subject_prefix":"aotx.j"},'
          b'"version":1}},"required_profiles":["shared"],"version":1}\n')


def test_fresh_pack_golden_bytes(tmp_path):
    path = tmp_path / "rt.aotxrt"
    assert main(["pack", "--runtime", str(path), "--shared"]) == 0
    assert path.read_bytes() == GOLDEN
    rf = read_runtime_file(path)
    assert rf.shared and rf.name == "main" and rf.capacities() == Capacities()
    assert rf.stream() == ("AOTX_JOURNAL", "aotx.j")


def test_pack_twice_is_byte_identical(tmp_path):
    path = tmp_path / "rt.aotxrt"
    _, changed = pack_shared(path, name="alpha", capacities=Capacities(receipts=64))
    assert changed
    first, mtime = path.read_bytes(), path.stat().st_mtime_ns
    _, changed = pack_shared(path)
    assert not changed and path.read_bytes() == first and path.stat().st_mtime_ns == mtime
    assert main(["pack", "--runtime", str(path), "--shared"]) == 0
    assert path.read_bytes() == first
    assert read_runtime_file(path).capacities().receipts == 64


def test_pack_upgrades_existing_file_keeping_components(tmp_path):
    path = tmp_path / "identity.aotxrt"
    components = {"model": {"offset": 4096, "length": 98_400_000, "sha256": "ab" * 32}}
    path.write_text(json.dumps({"format": "aotx.runtime", "version": 1, "name": "identity",
                                "required_profiles": [], "profiles": {}, "components": components}))
    assert not read_runtime_file(path).shared
    rf, changed = pack_shared(path)
    assert changed and rf.shared and rf.name == "identity" and rf.components == components
    again = path.read_bytes()
    assert main(["pack", "--runtime", str(path), "--shared"]) == 0
    assert path.read_bytes() == again


def test_pack_capacity_option_changes_only_that_bound(tmp_path):
    path = tmp_path / "rt.aotxrt"
    assert main(["pack", "--runtime", str(path), "--shared", "--spaces", "7"]) == 0
    caps = read_runtime_file(path).capacities()
    assert caps.spaces == 7 and caps.participants == 1024
    assert main(["pack", "--runtime", str(path), "--shared", "--receipts", "9"]) == 0
    caps = read_runtime_file(path).capacities()
    assert (caps.spaces, caps.receipts) == (7, 9)


def _doc(path):
    return json.loads(path.read_text())


def test_reader_refuses_unknown_required_profile(tmp_path):
    path = tmp_path / "rt.aotxrt"
    pack_shared(path)
    doc = _doc(path)
    doc["required_profiles"] = ["media", "shared"]
    doc["profiles"]["media"] = {"version": 1}
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeFileError, match=r"requires profile 'media', which this reader does not know "
                                               r"\(known: shared\)"):
        read_runtime_file(path)
    with pytest.raises(RuntimeFileError, match="'media'"):
        pack_shared(path)  # the packer is a reader too: it never drops what it cannot understand


def test_reader_refuses_newer_profile_and_format_versions(tmp_path):
    path = tmp_path / "rt.aotxrt"
    pack_shared(path)
    doc = _doc(path)
    doc["profiles"]["shared"]["version"] = 2
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeFileError, match="requires profile 'shared' version 2; this reader knows up to "
                                               "version 1"):
        read_runtime_file(path)
    doc["profiles"]["shared"]["version"], doc["version"] = 1, 2
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeFileError, match="format version 2 is newer than this reader's 1"):
        read_runtime_file(path)


def test_reader_refuses_malformed_files(tmp_path):
    path = tmp_path / "rt.aotxrt"
    with pytest.raises(RuntimeFileError, match="does not exist"):
        read_runtime_file(path)
    path.write_bytes(b"\xff")
    with pytest.raises(RuntimeFileError, match="not canonical JSON"):
        read_runtime_file(path)
    pack_shared(tmp_path / "ok")
    doc = _doc(tmp_path / "ok")
    doc["profiles"]["shared"]["capacities"]["spaces"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeFileError, match="capacity spaces"):
        read_runtime_file(path)
    doc = _doc(tmp_path / "ok")
    doc["required_profiles"] = ["shared", "shared"]
    path.write_text(json.dumps(doc))
    with pytest.raises(RuntimeFileError, match="sorted list of distinct"):
        read_runtime_file(path)
