"""The embedding model in a worker process (kernels/embedding/process.py, worker.py): the same vectors
as in this process, a worker that died is started again, close() ends it; `aotx serve` / `aotx boot`
embed there with `--embedding-worker process`, or by default (`auto`) where they have at least 4 usable
CPUs (ops/model_args.py, aotx.runtime.embedding.embedding_worker), else in a thread."""
from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

from aotx.runtime.embedding import embedding_worker
from kernels.embedding import load_embedding_model
from kernels.embedding.process import EmbeddingProcess, EmbeddingWorkerError
from ops.model_args import add_model_arguments, runtime_options
from tests.waiting import process_gone, wait_until

TEXTS = ["A man is eating food.", "Héllo wörld — ünïcode ✓ 数字", ""]


def test_a_worker_process_embeds_as_this_process_does_and_is_restarted_after_it_died():
    worker = EmbeddingProcess(threads=1)
    try:
        worker.start()
        got = worker.embed(TEXTS)
        assert got.dtype == np.float32 and got.shape == (3, worker.dim)
        np.testing.assert_allclose(got, load_embedding_model().embed(TEXTS), atol=2e-6)
        assert worker.embed([]).shape == (0, worker.dim)
        with pytest.raises(TypeError):
            worker.embed([b"bytes"])
        first = worker.pid
        os.kill(first, 9)
        with pytest.raises(EmbeddingWorkerError, match="exited"):
            worker.embed(TEXTS)
        np.testing.assert_allclose(worker.embed(TEXTS[:1]), got[:1], atol=2e-6)   # a fresh worker
        assert worker.pid != first
    finally:
        pid = worker.pid
        worker.close()
    assert worker.pid is None and pid is not None
    wait_until(lambda: process_gone(pid), "the closed worker to exit", timeout=30)


def test_serve_and_boot_embed_in_a_process_by_default_where_they_have_four_cpus_else_in_a_thread():
    p = argparse.ArgumentParser()
    add_model_arguments(p)
    assert p.parse_args([]).embedding_worker == "auto"
    assert embedding_worker("auto", cpus=4) == embedding_worker("auto", cpus=16) == "process"
    assert embedding_worker("auto", cpus=3) == embedding_worker("auto", cpus=1) == "thread"
    assert embedding_worker("thread", cpus=16) == "thread" and embedding_worker("process", cpus=1) == "process"
    assert embedding_worker("auto") == ("process" if len(os.sched_getaffinity(0)) >= 4 else "thread")
    default = runtime_options(p.parse_args([]))["embedder"]
    assert (default is None) == (embedding_worker("auto") == "thread")
    assert default is None or isinstance(default, EmbeddingProcess)
    assert runtime_options(p.parse_args(["--embedding-worker", "thread"]))["embedder"] is None
    assert isinstance(runtime_options(p.parse_args(["--embedding-worker", "process"]))["embedder"], EmbeddingProcess)


def test_the_worker_outlives_a_sigterm_to_the_process_group_and_ends_with_its_stdin():
    import signal

    worker = EmbeddingProcess(threads=1)
    try:
        worker.start()
        worker.embed(TEXTS[:1])
        os.kill(worker.pid, signal.SIGTERM)   # what `kill -TERM -<pgid>` of the server gives it
        os.kill(worker.pid, signal.SIGINT)    # a terminal's Ctrl-C
        os.kill(worker.pid, signal.SIGHUP)    # the server's grant reload, sent to the group
        pid = worker.pid
        assert worker.embed(TEXTS[:1]).shape == (1, worker.dim) and worker.pid == pid   # the same worker
    finally:
        worker.close()
    wait_until(lambda: process_gone(pid), "the closed worker to exit", timeout=30)
