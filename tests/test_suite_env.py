"""The suite's own environment (tests/conftest.py): what every process it runs inherits."""
from __future__ import annotations

import subprocess
import sys

import numpy


def test_no_huge_pages_for_numpy_here_or_in_the_processes_the_suite_starts():
    # start cost: faulting the model's weights in on huge pages costs seconds of CPU per process on the sandbox
    assert numpy._core.multiarray._get_madvise_hugepage() is False
    child = subprocess.run([sys.executable, "-c", "import numpy; print(numpy._core.multiarray._get_madvise_hugepage())"],
                           capture_output=True, text=True, timeout=60, check=True)
    assert child.stdout.strip() == "False"


def test_our_top_level_packages_are_ours_in_a_console_script(tmp_path):
    """`aotx` runs as a console script (sys.path[0] = the venv's bin, then site-packages, our editable
    finder last): a PyPI package with one of our top-level names shadows ours there and nowhere in
    pytest's own process. transformers 5.25 pulled in HF's `kernels` so (pyproject pins below it)."""
    import pathlib
    repo = pathlib.Path(__file__).resolve().parents[1]
    names = ("aotx", "api", "eventlog", "kernels", "ops", "scenarios")
    code = "import importlib\n" + "".join(f"print(importlib.import_module({n!r}).__file__)\n" for n in names)
    script = tmp_path / "bin" / "probe.py"   # run as a script from elsewhere, as the venv's bin/aotx runs
    script.parent.mkdir()
    script.write_text(code)
    child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path, check=True)
    for name, path in zip(names, child.stdout.split()):
        assert pathlib.Path(path).resolve().is_relative_to(repo / name), f"{name} comes from {path}, not {repo / name}"
