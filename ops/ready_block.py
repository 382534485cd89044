"""The block `aotx serve` prints once it answers: where everything is, in one place.

Its first line stays `aotx: serving MODEL on http://HOST:PORT (backend ..., auth ...)` (what
tests/server_process.py and ops/gpu/serve_bench.py wait for); the lines below name the API, the page,
the metrics, the shared routes (with how the runtime booted), the bearer tokens, the model and a first
`aotx chat` command. Printed with one write, so no log line lands inside it.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReadyFacts:
    host: str
    port: int
    model_id: str
    backend: str
    model_file: str
    auth: bool
    tokens: str              # where the bearer tokens are (tokens_note)
    nats: str                # redacted URL
    embedded: bool
    boot: str                # ops.shared_stack.boot_summary
    token_dir: str | None = None   # the development tokens' folder, if any
    workers: str = ""        # ", N HTTP workers PID ..." with --http-workers N > 1


def tokens_note(args: argparse.Namespace) -> tuple[str, str | None]:
    """Where the bearer tokens are, and the development tokens' folder (None with --config)."""
    if args.config:
        return f"the principals of the gateway config {args.config} (no development tokens)", None
    var = Path(args.var)
    return (f"development bearer tokens for alice and bob are in {var / 'tokens'}/ "
            f"(gateway config {var / 'gateway.json'})"), str(var / "tokens")


def model_file(service) -> str:
    path = getattr(getattr(service, "bundle", None), "path", None)
    return str(path) if path is not None else "?"


def browsable_url(host: str, port: int) -> str:
    """A URL a browser on this machine can open: a wildcard bind (0.0.0.0, ::, "") is reached on the
    loopback address, an IPv6 literal goes in brackets."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "[::1]"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def ready_block(f: ReadyFacts) -> str:
    url = browsable_url(f.host, f.port)
    alice = "" if f.token_dir is None else f" --token-file {f.token_dir}/alice"
    rows = [
        ("API", f"{url}/v1 (OpenAI chat/completions/responses) and {url}/v1/messages (Anthropic)"),
        ("page", f"{url}/"),
        ("metrics", f"{url}/metrics (Prometheus; the same figures as JSON at {url}/v1/stats)"),
        ("shared", f"{url}/aotx/v1/shared (bearer token); shared runtime {f.boot} on "
                   f"{'embedded ' if f.embedded else ''}nats {f.nats}"),
        ("tokens", f.tokens),
        ("model", f"{f.model_id}, backend {f.backend}, from {f.model_file}"),
        ("chat", f"aotx chat --base-url {url}{alice}"),
    ]
    head = (f"aotx: serving {f.model_id} on http://{f.host}:{f.port} (backend {f.backend}, auth {'on' if f.auth else 'off'}"
            f"{f.workers})")
    return "\n".join([head] + [f"aotx:   {name:<8} {text}" for name, text in rows]) + "\n"


def print_ready(f: ReadyFacts) -> None:
    sys.stderr.write(ready_block(f))
    sys.stderr.flush()
