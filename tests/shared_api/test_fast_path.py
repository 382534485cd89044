"""The ASGI fast path (api.shared.fast) answers exactly as the Quart route does: one script of requests
(successes, exact and conflicting retries, every error class) sent to two apps over two fresh runtimes
on one real nats-server, the fast path on in one and off in the other; every answer's status, headers
(in order) and body bytes must be equal, and the fast path must have answered the ones it claims."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from quart import Quart

from api.shared import attach_shared
from aotx.runtime import SharedRuntime
from aotx.state.derive import lineage_for

from .harness import BASE, PRINCIPALS, SCHEMA, TOKENS, fresh_spec

LIMIT = 4096   # the apps' MAX_CONTENT_LENGTH


@contextlib.asynccontextmanager
async def _app(url: str, fast: bool):
    app = Quart("fast-path-test")
    app.config["MAX_CONTENT_LENGTH"] = LIMIT
    attach_shared(app, SharedRuntime(url, fresh_spec(), progress=False), PRINCIPALS, media_url=url)
    app.extensions["aotx_shared"]["fast"].on = fast
    async with app.test_app() as test_app:
        yield app, test_app.test_client()


class _NotStarted:
    started = False


class _Broken:
    """A runtime whose submit fails (a bug): the answer is the app's own 500."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.started = inner, True

    async def submit(self, actor, mutation):
        raise RuntimeError("boom")


def _scrub(raw: bytes, rid: str) -> bytes:
    """`raw` with the request id and what differs between two runtimes (which boot, stream, commit a
    receipt names) replaced byte for byte by placeholders; every other byte is kept."""
    raw = raw.replace(f'"{rid}"'.encode(), b'"ID"')
    got = json.loads(raw)
    save = got.get("save") if isinstance(got, dict) else None
    for key in ("boot", "commit_digest", "incarnation", "source") if isinstance(save, dict) else ():
        if isinstance(save.get(key), str):
            raw = raw.replace(f'"{key}":"{save[key]}"'.encode(), f'"{key}":"<{key}>"'.encode())
    return raw


def _body(name: str, seq: int, key: str, **fields: Any) -> bytes:
    return json.dumps({"schema": SCHEMA, "lineage": lineage_for(name).hex(),
                       "operation_key": hashlib.md5(key.encode()).hexdigest(),
                       "sequence": str(seq), **fields}).encode()


def _auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}", "Content-Type": "application/json"}


async def _both(apps, method: str, path: str, *, data: bytes = b"", headers: dict[str, str] | None = None,
                served: bool = True, rid: str | None = "rid-1", swap=None) -> tuple[int, Any]:
    """The request through both apps; asserts equal answers (Content-Length: each its own body's length);
    returns (status, JSON body with placeholders)."""
    answers = []
    for app, client in apps:
        ext = app.extensions["aotx_shared"]
        before, runtime = ext["fast"].served, ext["runtime"]
        if swap is not None:
            ext["runtime"] = swap(runtime)
        sent = {**(headers or {}), **({"x-request-id": rid} if rid else {})}
        try:
            resp = await client.open(BASE + path, method=method, data=data, headers=sent)
        finally:
            ext["runtime"] = runtime
        raw = await resp.get_data()
        assert ext["fast"].served - before == (served if ext["fast"].on else 0), (path, ext["fast"].on)
        heads = [(k.lower(), v) for k, v in resp.headers.items()]
        assert ("content-length", str(len(raw))) in heads
        ids = {v for k, v in heads if k in ("x-request-id", "request-id")}
        assert len(ids) == 1 and (rid is None or ids == {rid} or len(rid) > 128)
        heads = [(k, "ID" if k in ("x-request-id", "request-id") else v) for k, v in heads if k != "content-length"]
        raw = _scrub(raw, ids.pop())
        answers.append((resp.status_code, heads, raw))
    assert answers[0] == answers[1], (method, path)
    return answers[0][0], json.loads(answers[0][2])


async def test_the_fast_path_answers_as_the_quart_route(nats_url):
    async with _app(nats_url, True) as fast, _app(nats_url, False) as slow:
        apps = (fast, slow)
        a = "alice"
        status, got = await _both(apps, "POST", "/participant", data=_body(a, 1, "k1"), headers=_auth(a))
        assert status == 201, got
        retry = await _both(apps, "POST", "/participant", data=_body(a, 1, "k1"), headers=_auth(a))
        assert retry[0] == 200   # the exact retry: its receipt again
        status, got = await _both(apps, "POST", "/participant", data=_body(a, 1, "k2"), headers=_auth(a))
        assert status == 409, got                      # a conflicting retry of sequence 1
        await _both(apps, "POST", "/participant", data=_body("bob", 1, "b1"), headers=_auth("bob"), rid=None)
        status, space = await _both(apps, "POST", "/spaces", data=_body(a, 2, "k3", scope="private"),
                                    headers=_auth(a))
        assert status == 201, space
        spc = space["resource"]
        status, bob = await _both(apps, "GET", "/participant", headers=_auth("bob"), served=False)
        member = dict(participant=bob["participant"], permissions=["read"])
        status, got = await _both(apps, "POST", f"/spaces/{spc}/members", data=_body(a, 3, "k4", **member),
                                  headers=_auth(a))
        assert status == 201, got
        status, got = await _both(apps, "POST", f"/spaces/{spc}/conversations", data=_body(a, 4, "k5"),
                                  headers=_auth(a), rid=None)
        con = got["resource"]
        other = lambda ident: ident[:-1] + ("1" if ident[-1] == "0" else "0")   # noqa: E731 (well formed, unknown)
        errors = [   # (path, body, headers, status)
            ("/spaces", b"{", _auth(a), 400),                                        # bad JSON
            ("/spaces", b"[]", _auth(a), 400),
            ("/spaces", _body(a, 5, "k6", scope=7), _auth(a), 400),                  # a wrong type
            ("/spaces", b'{"sequence": 5}', _auth(a), 400),
            ("/spaces/spc-00-00/members", _body(a, 5, "k7", **member), _auth(a), 400),   # malformed id
            (f"/spaces/{other(spc)}/members", _body(a, 5, "k7", **member), _auth(a), 404),   # unknown ids
            (f"/conversations/{other(con)}/cancellations", _body(a, 5, "k8", target_sequence="1"), _auth(a), None),
            (f"/conversations/{con}/cancellations", _body(a, 5, "k8", target_sequence="99"), _auth(a), None),
            (f"/conversations/{con}/inputs", _body(a, 5, "k9", text="hi", model="m"), _auth(a), None),
            (f"/spaces/{spc}/publications", _body(a, 5, "k10", object="x"), _auth(a), 400),
            ("/spaces", _body(a, 5, "k11"), {}, 401),                               # no bearer
            ("/spaces", _body(a, 5, "k11"), {"Authorization": "Bearer nope"}, 401),
            ("/spaces", _body(a, 5, "k11"), {"Authorization": f"Basic {TOKENS[a]}"}, 401),
            ("/spaces", _body(a, 5, "k11"), {"Authorization": f"bearer  {TOKENS[a]} "}, None),
            ("/spaces", _body("reader", 1, "r1"), _auth("reader"), 403),            # no rights
            ("/participant/retirements", _body(a, 9, "k12", retry_floor="99"), _auth(a), None),
        ]
        for path, data, headers, want in errors:
            status, got = await _both(apps, "POST", path, data=data, headers=headers)
            assert want is None or status == want, (path, status, got)
        for rid in (None, "a" * 129, "ok.id:1-2_3"):
            await _both(apps, "POST", "/spaces", data=b"{", headers=_auth(a), rid=rid)
        status, _ = await _both(apps, "POST", "/spaces", data=b"x" * (LIMIT + 1), headers=_auth(a), served=False)
        assert status == 413                           # oversize: Quart answers it
        passed = [("POST", "/spaces?x=1", True), ("POST", "/spaces/", True), ("POST", "/spaces/a.b/members", True),
                  ("PUT", "/spaces", True), ("POST", "/nowhere", True)]
        for method, path, _ in passed:
            await _both(apps, method, path, data=b"{}", headers=_auth(a), served=False)
        await _both(apps, "POST", "/spaces", data=b"{}", headers={**_auth(a), "Expect": "100-continue"}, served=False)
        status, got = await _both(apps, "POST", "/spaces", data=_body(a, 5, "k13"), headers=_auth(a),
                                  swap=lambda rt: _NotStarted())
        assert status == 503, got
        status, got = await _both(apps, "POST", "/spaces", data=_body(a, 5, "k13", scope="private"),
                                  headers=_auth(a), swap=_Broken)
        assert status == 500, got
        reads = [(f"/spaces/{spc}", a, 200), (f"/conversations/{con}", a, 200), (f"/spaces/{spc}", "reader", 404),
                 (f"/operations/{space['operation']}", a, 200), (f"/operations/{other(space['operation'])}", a, 404),
                 ("/operations/op-00-00", a, 400), (f"/conversations/{con}", "carol", 404)]
        for path, who, want in reads:
            status, got = await _both(apps, "GET", path, headers=_auth(who))
            assert status == want, (path, status, got)
        assert (await _both(apps, "GET", f"/spaces/{spc}", headers={}))[0] == 401
        for path in (f"/spaces/{spc}?x=1", f"/operations/{space['operation']}/result", "/spaces"):
            await _both(apps, "GET", path, headers=_auth(a), served=False)
        await _both(apps, "HEAD", f"/spaces/{spc}", headers=_auth(a), served=False)
        status, me = await _both(apps, "GET", "/participant", headers=_auth(a), served=False)
        status, got = await _both(apps, "POST", "/spaces", data=_body(a, int(me["next_sequence"]), "k14",
                                                                     scope="private"), headers=_auth(a))
        assert status == 201, got


class _Service:
    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def test_the_fast_path_serves_every_app_shape_and_stands_aside_for_unknown_hooks():
    """`aotx serve`'s app (create_app), the lone gateway's and an HTTP worker's (forwarding installed) get
    every mutation POST and one-view GET; an app with a request hook it does not know gets none."""
    from api.app import create_app, create_shared_gateway
    from api.worker_proxy import install_forwarding

    serve = create_app(_Service())
    attach_shared(serve, _NotStarted(), {})
    worker = create_app(_Service())
    attach_shared(worker, _NotStarted(), {})
    install_forwarding(worker, "http://127.0.0.1:9")
    hooked = Quart("hooked")
    attach_shared(hooked, _NotStarted(), {})

    @hooked.before_request
    async def _mine() -> None:
        return None

    for app in (serve, create_shared_gateway(_NotStarted(), {}), worker, hooked):
        fast = app.extensions["aotx_shared"]["fast"]
        want = (0, 0) if app is hooked else (8, 3)
        assert (len(fast.routes("POST")), len(fast.routes("GET"))) == want, app.name
