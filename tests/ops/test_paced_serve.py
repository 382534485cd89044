"""ops.bench.paced_serve's stand-in for the GPU: each row's token is the next of a fixed text by its
position, and its logprobs say that token had all the probability (the numpy sampler's own logprobs)."""
from __future__ import annotations

import numpy as np

from ops.bench.paced_serve import PacedBackend


def test_the_paced_token_has_all_the_probability(model_bundle):
    backend = PacedBackend(model_bundle, 64, step_s=0.0)
    logits = np.array([[3.0], [7.0], [3.0 + len(backend.cycle)]], np.float32)   # positions
    chosen = backend.sample(logits, None)
    assert chosen[0] == backend.cycle[3] and chosen[1] == backend.cycle[7] and chosen[2] == chosen[0]
    chosen_lp, top_ids, top_lp = backend.logprobs(logits, chosen, 2)
    assert chosen_lp.tolist() == [0.0, 0.0, 0.0]
    assert top_ids[:, 0].tolist() == chosen.tolist() and top_lp[:, 0].tolist() == [0.0, 0.0, 0.0]
    assert np.isneginf(top_lp[:, 1]).all()
