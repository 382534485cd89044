"""The web page: the static files of api/web/ served at `/` (shared spaces), `/stats` (the server's
figures) and `/static/<name>`.

No build step and no data: the page is plain HTML, CSS and ES modules that call the public API with
the bearer token the user gives it (kept in the tab's sessionStorage); it adds no rights. The files
are read once, when the blueprint is made, into a fixed table of names, so a request can only ever
name one of them (no path reaches the file system: no traversal). Every answer carries a strict
Content-Security-Policy (no inline script or style, nothing from another origin), nosniff, no
referrer, and `Cache-Control: no-cache` (a new version of the page is picked up at once).
These paths need no token (api.auth: PAGE_PATHS, PAGE_PREFIX), and an HTTP worker serves them
itself (api.worker_proxy forwards none of them).
"""
from __future__ import annotations

from pathlib import Path

from quart import Blueprint, Response

from api.auth import PAGE_BLUEPRINT, PAGE_PREFIX
from api.errors import ApiError

WEB_DIR = Path(__file__).with_name("web")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
PAGES = {"/": "index.html", "/stats": "stats.html"}   # api.auth.PAGE_PATHS opens the same paths


def _read_files(folder: Path) -> dict[str, tuple[bytes, str]]:
    """{file name: (bytes, content type)} of the servable files directly in `folder`."""
    return {p.name: (p.read_bytes(), CONTENT_TYPES[p.suffix]) for p in sorted(folder.iterdir())
            if p.is_file() and p.suffix in CONTENT_TYPES}


def _answer(body: bytes, content_type: str) -> Response:
    return Response(body, status=200, content_type=content_type, headers={
        "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY", "Cache-Control": "no-cache"})


def make_blueprint(folder: Path = WEB_DIR) -> Blueprint:
    files = _read_files(folder)
    missing = sorted(set(PAGES.values()) - set(files))
    if missing:
        raise RuntimeError(f"the web page's files {missing} are missing from {folder}")
    bp = Blueprint(PAGE_BLUEPRINT, __name__)

    def page(name: str):
        async def handler():
            return _answer(*files[name])
        handler.__name__ = f"page_{name.split('.')[0]}"
        return handler

    for path, name in PAGES.items():
        bp.add_url_rule(path, view_func=page(name), methods=["GET"])

    @bp.get(PAGE_PREFIX + "<path:name>")
    async def static_file(name: str):
        found = files.get(name)
        if found is None:
            raise ApiError(404, f"no static file {name!r}", code="not_found")
        return _answer(*found)

    return bp
