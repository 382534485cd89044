"""What `aotx serve` imports at start: only what a start needs (every serve, HTTP worker and test server pays
for the rest in CPU)."""
from __future__ import annotations

import subprocess
import sys


def test_serve_does_not_import_the_http_workers_proxy_or_httpx():
    # httpx (with rich, click and pygments for its CLI) is the HTTP workers' forwarding client: --http-workers N only
    probe = ("import sys, ops.serve_cmd; "
             "print(sorted(m for m in ('httpx', 'api.worker_proxy', 'ops.http_worker') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
