"""ops.gpu.serving_report runs on the CPU at tiny sizes and writes its JSON and markdown table
(the HTTP part starts real servers: the H200 run exercises it; here the kernels and the engine)."""
from __future__ import annotations

import json

from ops.gpu import serving_report


def test_the_report_runs_on_numpy_and_states_the_ratios(tmp_path, monkeypatch):
    from ops.gpu.latency import IGNORE_EOS
    monkeypatch.delenv(IGNORE_EOS, raising=False)   # --ignore-eos sets it (for the client processes)
    assert serving_report.main(["--backend", "numpy", "--streams", "1,2", "--max-tokens", "3", "--ignore-eos",
                                "--http-loops", "", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "serving_report.json").read_text())
    assert set(doc["rows"]) == {"1", "2"} and doc["ignore_eos"] is True
    for row in doc["rows"].values():
        assert row["kernels_tok_s"] > 0
        assert set(row["engine"]) == {"behind", "classic"}
        for r in row["engine"].values():
            assert r["tokens"] == r["requests"] * 3 and 0 < r["device_busy_share"] <= 1.0   # each ran to 3
            assert {"ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "mean_decode_batch"} <= set(r)
    table = (tmp_path / "serving_report.md").read_text()
    assert "| 2 | engine | behind |" in table and "÷ kernels" in table
    assert "ignore_eos: every stream runs to it" in table

