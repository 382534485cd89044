"""`aotx serve` refuses impossible sizes before it loads or starts anything."""
from __future__ import annotations

import argparse

import pytest

from ops import serve_cmd


@pytest.mark.parametrize("flag,value", [("--max-batch", "0"), ("--kv-pages", "0"),
                                        ("--default-max-tokens", "-1"), ("--execution-deadline", "0"),
                                        ("--gpu-memory-utilization", "0"), ("--gpu-memory-utilization", "1.5")])
def test_impossible_sizes_are_refused_up_front(tmp_path, capsys, flag, value):
    parser = argparse.ArgumentParser()
    serve_cmd.add_arguments(parser)
    args = parser.parse_args([flag, value, "--var", str(tmp_path / "var")])
    assert serve_cmd.run(args) == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "var").exists()
