import numpy as np
import pytest

from kernels import BackendUnavailable, SamplingRows, available_backends, create_backend


def test_available():
    assert available_backends() == ["numpy"]


def test_cuda_refused_without_a_gpu(bundle):
    # the CUDA backend exists since 45e4a1a; on a machine without an NVIDIA GPU it is refused cleanly
    with pytest.raises(BackendUnavailable, match="backend 'cuda' unavailable: no NVIDIA GPU"):
        create_backend("cuda", bundle, num_pages=8)
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        create_backend("tpu", bundle, num_pages=8)


def test_numpy_backend_surface(backend):
    assert backend.name == "numpy" and backend.num_pages == 256 and backend.page_size == 16
    logits = np.zeros((2, 49152), np.float32)
    logits[0, 5] = logits[1, 9] = 3.0
    rows = SamplingRows(temperature=np.zeros(2, np.float32), top_p=np.ones(2, np.float32),
                        top_k=np.zeros(2, np.int32), seed=np.zeros(2, np.uint64),
                        step=np.zeros(2, np.int64))
    ids = backend.sample(logits, rows)
    assert ids.tolist() == [5, 9]
    lp, top_ids, top_lp = backend.logprobs(logits, ids, 2)
    assert top_ids[:, 0].tolist() == [5, 9] and lp.dtype == np.float32


def test_kernels_imports_nothing_of_ours():
    import subprocess
    import sys
    code = ("import sys, kernels; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('aotx', 'api', 'ops', 'eventlog')]; print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)
