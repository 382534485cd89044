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
