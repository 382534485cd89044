"""`aotx serve` over a paced stand-in for the GPU (a benchmark tool, not a test): every step of the real
engine (scheduler, paged pool, detokenizer, delivery to the event loop) runs as it does on the H200, but
the forward is a sleep of `--step-ms` (the GIL released, as while the host waits for the device) and the
sampled token is the next one of a fixed English text by the row's position. So the whole server path of
a request — HTTP, the shared runtime's journal, the SSE readers — runs on the CPU at about the GPU's
token rate, and what the event loop costs shows up as it does beside the H200's engine, not hidden
behind the numpy model's seconds a step.

    python -m ops.bench.paced_serve [--step-ms 2.7] serve --backend numpy --engine-overlap on ...

(`ops.bench.shared_inputs --paced-step-ms 2.7` starts it so.) The model's real bundle is loaded (its
tokenizer and chat template; its weights are not used); --backend names no real backend then. With
`--engine-overlap on` the engine's device thread runs the sleeps, one step behind, as CUDA's launcher
overlaps; the default step (2.7 ms) is the H200's chat rate at 32 streams of 128 tokens (93 requests/s,
docs/PERFORMANCE.md, session 6).
"""
from __future__ import annotations

import sys
import time

import numpy as np

TEXT = ("The river runs past the old mill and under three stone bridges before it reaches the sea, where "
        "the fishing boats wait for the tide. ")
DEFAULT_STEP_MS = 2.7


class PacedBackend:
    name = "paced"

    def __init__(self, bundle, num_pages: int | None, page_size: int = 16, step_s: float = DEFAULT_STEP_MS / 1e3):
        self.config = bundle.config
        self.num_pages, self.page_size = int(num_pages or 2048), int(page_size)
        self.step_s = float(step_s)
        self.cycle = np.asarray(bundle.tokenizer.encode(TEXT), dtype=np.int32)

    def forward(self, batch) -> np.ndarray:
        time.sleep(self.step_s)
        # a "logit" per row: its position, from which sample() takes the text's next token
        return batch.positions[batch.logits_rows].astype(np.float32).reshape(-1, 1)

    def sample(self, logits: np.ndarray, rows) -> np.ndarray:
        return self.cycle[logits[:, 0].astype(np.int64) % len(self.cycle)]

    def masked_logits(self, logits: np.ndarray, mask) -> np.ndarray:
        return logits

    def logprobs(self, logits, chosen, k):
        """The paced token has all the probability (logprob 0, every other -inf): the numpy sampler's
        logprobs of logits that say so."""
        from kernels import sampler

        full = np.full((len(logits), int(self.config.vocab_size)), -np.inf, dtype=np.float32)
        full[np.arange(len(logits)), self.sample(logits, None)] = 0.0
        return sampler.logprobs(full, chosen, k)


def install(step_ms: float) -> None:
    """Make every backend the server creates a PacedBackend of `step_ms`."""
    import kernels
    import kernels.backend

    def create_backend(name, bundle, num_pages, page_size=16, gpu_memory_utilization=None):
        return PacedBackend(bundle, num_pages, page_size, step_ms / 1e3)
    kernels.create_backend = kernels.backend.create_backend = create_backend


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    step_ms = DEFAULT_STEP_MS
    if argv[:1] == ["--step-ms"]:
        step_ms, argv = float(argv[1]), argv[2:]
    install(step_ms)
    from ops.cli import main as cli_main
    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
