"""Where the embedding of shared inputs' texts runs: a thread of the server's process or a worker process
of its own (aotx serve --embedding-worker thread|process), with and without a Python thread busy
beside it (as the engine's thread and the event loop are under load). A benchmark, not a test.

    .venv/bin/python -m ops.bench.embedding_path [--texts 1,8,32] [--repeat 5]

Prints the median wall time of one batch (`embed` called from a worker thread, as
aotx.runtime.embedding does) for each way, batch size and load.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

from kernels.embedding import load_embedding_model
from kernels.embedding.process import EmbeddingProcess

TEXTS = ["Name three rivers.", "What is a prime number?", "Describe a cat in one sentence.",
         "Give two uses of copper.", "Why is the sky blue?", "List three fruits.",
         "What does a compiler do?", "Say something about the moon."]


def busy(stop: threading.Event) -> None:
    """Pure Python work holding the GIL between switch intervals (an engine thread, an event loop)."""
    while not stop.is_set():
        sum(i * i for i in range(2000))


def timed(embedder, texts: list[str], repeat: int, loaded: bool) -> float:
    stop = threading.Event()
    helper = threading.Thread(target=busy, args=(stop,), daemon=True) if loaded else None
    if helper:
        helper.start()
    try:
        runs = []
        for _ in range(repeat):
            box: list = []
            worker = threading.Thread(target=lambda: box.append(embedder.embed(texts)))
            t0 = time.perf_counter()
            worker.start()
            worker.join()
            runs.append(time.perf_counter() - t0)
        return float(np.median(runs)) * 1e3
    finally:
        stop.set()
        if helper:
            helper.join()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", default="1,8,32")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.texts.split(",")]
    process = EmbeddingProcess()
    process.start()
    ways = {"thread": load_embedding_model(), "process": process}
    try:
        for embedder in ways.values():
            embedder.embed(TEXTS)   # warm (the process: loaded and ready)
        print("\n## embedding one batch: median ms (a thread of this process vs a worker process)\n")
        print("| texts | thread | thread, Python thread busy | process | process, Python thread busy |")
        print("|---:|---:|---:|---:|---:|")
        for n in sizes:
            texts = [TEXTS[i % len(TEXTS)] + f" ({i})" for i in range(n)]
            cells = [timed(e, texts, args.repeat, loaded) for e in ways.values() for loaded in (False, True)]
            print(f"| {n} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    finally:
        process.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
