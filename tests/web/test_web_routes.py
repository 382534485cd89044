"""The web page's routes in process (Quart test client): `/` and `/stats` are HTML under a strict
Content-Security-Policy, the static files have their content types, an unknown or traversing name is a
404 in the JSON envelope, no token is needed even where the API needs one, and an HTTP worker serves
the page itself (nothing of it is forwarded to the main process)."""
from __future__ import annotations

import re

import pytest

from api.app import create_app
from api.auth import PAGE_PATHS
from api.settings import GatewaySettings, token_digest
from api.web_routes import PAGES, WEB_DIR
from api.worker_proxy import forwarded
from tests.api_gateway.test_auth_and_bind import _IdleService
from tests.web.browser import chromium

STATIC = ("app.js", "api.js", "sse.js", "conversation.js", "space.js", "dom.js", "stats.js", "app.css",
          "favicon.svg")


@pytest.fixture
def client():
    """A gateway bound to a public address: the API needs a token there, the page does not."""
    settings = GatewaySettings(host="0.0.0.0", token_digests={token_digest("s3cret"): "alice"})
    return create_app(_IdleService(), settings).test_client()


def _csp(response) -> dict[str, str]:
    policy = response.headers["Content-Security-Policy"]
    return {d.split()[0]: d.split(None, 1)[1] if " " in d else "" for d in (p.strip() for p in policy.split(";")) if d}


@pytest.mark.parametrize("path", sorted(PAGE_PATHS))
async def test_pages_are_html_under_a_strict_policy_without_a_token(client, path):
    r = await client.get(path)
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = _csp(r)
    assert csp["default-src"] == "'self'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
    assert csp["object-src"] == "'none'" and csp["frame-ancestors"] == "'none'"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    html = (await r.get_data()).decode("utf-8")
    # no inline script or style, no handler attributes: every script is a same-origin module file
    assert re.findall(r"<script\b[^>]*>", html) and all(
        'type="module"' in tag and 'src="/static/' in tag for tag in re.findall(r"<script\b[^>]*>", html))
    assert not re.search(r"<script\b[^>]*>\s*[^<\s]", html) and "<style" not in html
    assert not re.search(r"\son[a-z]+\s*=", html) and " style=" not in html
    assert (await client.head(path)).status_code == 200


async def test_static_files_have_their_content_types(client):
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
    for name in STATIC:
        r = await client.get(f"/static/{name}")
        assert r.status_code == 200, name
        assert r.headers["Content-Type"] == types[name[name.rindex("."):]], name
        assert "Content-Security-Policy" in r.headers and r.headers["Cache-Control"] == "no-cache"
        assert await r.get_data() == (WEB_DIR / name).read_bytes()


@pytest.mark.parametrize("path", ["/static/nope.js", "/static/../web_routes.py", "/static/..%2Fweb_routes.py",
                                  "/static/%2e%2e/auth.py", "/static/web/app.js", "/static//etc/passwd",
                                  "/static/", "/static/index.html/", "/static/.", "/static/%00"])
async def test_unknown_or_traversing_static_path_is_a_json_404(client, path):
    r = await client.get(path, follow_redirects=True)   # a doubled slash is merged first (308)
    # a path the page's static route matches is open (its answer, 404, needs no token); one that no
    # route of the page matches is like any other path: 401 without the token, 404 with it
    if r.status_code == 401:
        r = await client.get(path, follow_redirects=True, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 404, path
    body = await r.get_json()
    assert body["error"]["message"] and "Content-Security-Policy" not in r.headers, path
    assert b"import" not in await r.get_data()


async def test_the_api_still_needs_its_token(client):
    assert (await client.get("/v1/models")).status_code == 401
    assert (await client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})).status_code == 200
    for path in ("/statsx", "/static", "/index.html", "/stats/", "/static/"):   # only the page's routes are open
        assert (await client.get(path)).status_code == 401, path


async def test_a_route_under_static_that_is_not_the_page_s_still_needs_the_token():
    """Openness follows the router's match (the page's blueprint), not the path's prefix: a route added
    under /static/ by anything else is not public."""
    from quart import Quart

    from api.app import create_app

    app: Quart = create_app(_IdleService(), GatewaySettings(host="0.0.0.0", token_digests={token_digest("s3cret"): "alice"}))

    @app.get("/static-admin/<name>")
    async def _other(name):
        return {"name": name}

    app.add_url_rule("/static/x/admin", "not_the_page", _other, defaults={"name": "x"}, methods=["GET"])
    c = app.test_client()
    assert (await c.get("/static-admin/a")).status_code == 401
    assert (await c.get("/static/x/admin")).status_code == 401
    assert (await c.get("/static/x/admin", headers={"Authorization": "Bearer s3cret"})).status_code == 200


def test_page_paths_are_the_pages_and_no_worker_forwards_them():
    assert set(PAGES) == PAGE_PATHS
    for path in (*PAGE_PATHS, *(f"/static/{name}" for name in STATIC)):
        assert not forwarded("GET", path, {}), path


def test_a_missing_browser_fails_the_page_test_loudly_saying_how_to_install_it(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"NO BROWSER: .*apt-get install -y chromium chromium-driver"):
        chromium(binary=str(tmp_path / "chromium"))


async def test_the_lone_gateway_serves_the_page_too():
    from api.app import create_shared_gateway

    class _NotStarted:   # requests for the page never reach the runtime (nor does the test client start it)
        started = False

    client = create_shared_gateway(_NotStarted(), {}).test_client()
    r = await client.get("/")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "Content-Security-Policy" in r.headers
    assert (await client.get("/static/app.js")).status_code == 200
    assert (await client.get("/static/nope.js")).status_code == 404


def test_every_page_file_ships_in_the_wheel():
    """pyproject's package-data for api names every file the page serves (a wheel without them serves no page)."""
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["api"]
    served = [p for p in WEB_DIR.iterdir() if p.is_file()]
    assert served and all(any(fnmatch.fnmatch(f"web/{p.name}", pat) for pat in patterns) for p in served), patterns
