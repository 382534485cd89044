"""ops.gpu.serving_report runs on the CPU at tiny sizes and writes its JSON and markdown table
(the HTTP part starts real servers: the H200 run exercises it; here the kernels and the engine)."""
from __future__ import annotations

import json

from ops.gpu import serving_report


def test_the_report_runs_on_numpy_and_states_the_ratios(tmp_path):
    assert serving_report.main(["--backend", "numpy", "--streams", "1,2", "--max-tokens", "3",
                                "--http-loops", "", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "serving_report.json").read_text())
    assert set(doc["rows"]) == {"1", "2"}
    for row in doc["rows"].values():
        assert row["kernels_tok_s"] > 0
        assert set(row["engine"]) == {"behind", "classic"}
        for r in row["engine"].values():
            assert r["tokens"] > 0 and 0 < r["device_busy_share"] <= 1.0
            assert {"ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "mean_decode_batch"} <= set(r)
    table = (tmp_path / "serving_report.md").read_text()
    assert "| 2 | engine | behind |" in table and "÷ kernels" in table
