"""Hostile input on /aotx/v1/shared over a real nats-server: query counters and Last-Event-ID cursors that
are not ASCII decimal strings, JSON bodies nested too deep or carrying NaN/Infinity, methods a route does
not take. Each is a 400 (405) in the shared envelope {"error": {"type", "message"}} and changes nothing;
every answer, streams included, carries a request id."""
from __future__ import annotations

import asyncio
import re
from urllib.parse import quote

import httpx
import pytest

from aotx.strict_json import MAX_JSON_DEPTH

from .harness import BASE, TOKENS, fresh_spec, journal_bytes, shared_app

SPACE = "spc-" + "1" * 32 + "-" + "2" * 32
CON = "con-" + "1" * 32 + "-" + "3" * 32
OP = "op-" + "1" * 32 + "-" + "4" * 32
OBJ = "5" * 32
# every route that reads a counter from the query string, and the counters it reads
QUERY_ROUTES = [
    ("/spaces", ("cursor", "limit")),
    (f"/spaces/{SPACE}/members", ("cursor", "limit")),
    (f"/spaces/{SPACE}/conversations", ("cursor", "limit")),
    (f"/spaces/{SPACE}/memory", ("cursor", "limit")),
    (f"/conversations/{CON}/events", ("cursor", "limit")),
    (f"/operations/{OP}/result", ("offset", "limit")),
    (f"/operations/{OP}/events", ("offset",)),
    (f"/memory/{OBJ}", ("offset",)),
]
# str.isdigit() holds for all of these; int() takes some of them and raises on the others
NOT_ASCII = ["²", "①", "١", "１", "٣٤", "1²", "𝟏", "߁", "৪"]
NOT_CANONICAL = ["", "+1", "-1", " 1", "1 ", "01", "1_0", "0x1", "1e3", "1.0", "9" * 21]
POSTS = ["/participant", "/participant/retirements", "/spaces", f"/spaces/{SPACE}/members",
         f"/spaces/{SPACE}/conversations", f"/conversations/{CON}/inputs", f"/conversations/{CON}/cancellations",
         f"/spaces/{SPACE}/publications"]
GENERATED = re.compile(r"req_[0-9a-f]{24}")


def assert_shared_error(status: int, body: object, expected: int = 400) -> str:
    assert status == expected, body
    assert isinstance(body, dict) and set(body) == {"error", "request_id"}, body
    assert isinstance(body["error"]["type"], str) and isinstance(body["error"]["message"], str)
    return body["error"]["message"]


async def test_counters_must_be_ascii_decimal_strings(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (_, p, _client):
        alice = p["alice"]
        for path, names in QUERY_ROUTES:
            for name in names:
                for text in NOT_ASCII + NOT_CANONICAL:
                    status, body = await alice.get(f"{path}?{name}={quote(text)}")
                    message = assert_shared_error(status, body)
                    assert name in message, (path, name, text, message)
                # ASCII digits pass the parse: what comes back is about the (unknown) resource, not the query
                status, body = await alice.get(f"{path}?{name}=1")
                assert status in (200, 404), (path, name, status, body)


# Header values reach the app as latin-1 text: the superscripts are the digits a client can put there
# as single bytes (str.isdigit() holds, int() raises); UTF-8 bytes of other digits arrive as mojibake.
HEADER_CURSORS = [b"\xb2", b"\xb9", b"1\xb3", *(t.encode() for t in NOT_ASCII), *(t.encode() for t in NOT_CANONICAL)]


async def test_last_event_id_cursor_must_be_ascii_decimal(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (_, p, client):
        transport = httpx.ASGITransport(app=client.app)
        headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway", headers=headers) as http:
            for path in (f"/conversations/{CON}/events?stream=true", f"/operations/{OP}/events"):
                stream = path.partition("?")[0]
                for raw in HEADER_CURSORS:
                    r = await http.get(BASE + path, headers={"Last-Event-ID": f"{BASE}{stream}@".encode() + raw})
                    assert "Last-Event-ID" in assert_shared_error(r.status_code, r.json()), raw
                r = await http.get(BASE + path, headers={"Last-Event-ID": f"{BASE}{stream}@7"})
                assert r.status_code == 404, r.text


def deep_body(depth: int) -> bytes:
    return b'{"schema": "aotx.shared.mutation.v1", "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("raw,why", [
    (deep_body(1000), f"deeper than {MAX_JSON_DEPTH}"),
    (deep_body(MAX_JSON_DEPTH), f"deeper than {MAX_JSON_DEPTH}"),
    (b'{"sequence": NaN}', "NaN"), (b'{"sequence": Infinity}', "Infinity"),
    (b'{"x": [-Infinity]}', "Infinity"), (b'{"temperature": 1e999}', "overflows"),
    (b'{"n": ' + b"1" * 5000 + b"}", "digits"),
])
async def test_hostile_bodies_are_400_on_every_post_and_change_nothing(nats_url, raw, why):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, _client):
        alice = p["alice"]
        await alice.sync()
        assert (await alice.post("/participant", alice.body()))[0] == 201
        before = await journal_bytes(runtime)
        for path in POSTS:
            status, body = await alice.post_raw(path, raw)
            assert why in assert_shared_error(status, body), (path, body)
        assert await journal_bytes(runtime) == before
        assert (await alice.sync())["next_sequence"] == "2"


@pytest.mark.parametrize("field,value", [("temperature", 10 ** 400), ("top_p", -(10 ** 400)),
                                         ("temperature", 2 ** 1024), ("max_output_tokens", 10 ** 400)])
async def test_an_input_number_too_large_for_a_float_is_400(nats_url, field, value):
    async with shared_app(nats_url, fresh_spec()) as (runtime, p, _client):
        alice = p["alice"]
        await alice.sync()
        assert (await alice.post("/participant", alice.body()))[0] == 201
        _, sp = await alice.post("/spaces", alice.body(scope="private"))
        _, conv = await alice.post(f"/spaces/{sp['resource']}/conversations", alice.body())
        before = await journal_bytes(runtime)
        status, body = await alice.post(f"/conversations/{conv['resource']}/inputs",
                                        alice.body(text="hi", model="smollm2-135m-instruct", **{field: value}))
        assert field in assert_shared_error(status, body)
        assert await journal_bytes(runtime) == before


async def test_405_has_allow_in_the_shared_envelope(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (_, p, client):
        resp = await client.open(f"{BASE}/spaces", method="TRACE", headers=p["alice"].headers)
        assert resp.status_code == 405
        allowed = {m.strip() for m in resp.headers["Allow"].split(",")}
        assert {"GET", "POST"} <= allowed and "TRACE" not in allowed
        assert_shared_error(405, await resp.get_json(), 405)
        assert GENERATED.fullmatch(resp.headers["x-request-id"])


async def test_every_shared_answer_has_a_request_id(nats_url):
    async with shared_app(nats_url, fresh_spec()) as (_, p, client):
        alice = p["alice"]
        await alice.sync()
        assert (await alice.post("/participant", alice.body()))[0] == 201
        status, sp = await alice.post("/spaces", alice.body(scope="private"))
        status, conv = await alice.post(f"/spaces/{sp['resource']}/conversations", alice.body())
        con = conv["resource"]
        answers = [
            await client.get(f"{BASE}/capabilities", headers=alice.headers),
            await client.get(f"{BASE}/capabilities"),                                      # 401
            await client.get(f"{BASE}/spaces?limit={quote('①')}", headers=alice.headers),  # 400
            await client.get(f"{BASE}/no/such/route", headers=alice.headers),              # 404
            await client.post(f"{BASE}/spaces", data=b"{", headers=alice.headers),         # 400 body
            await client.get(f"{BASE}/openapi.json", headers=alice.headers),
        ]
        for resp in answers:
            assert GENERATED.fullmatch(resp.headers.get("x-request-id", "")), (resp.status_code, resp.headers)
        resp = await client.get(f"{BASE}/capabilities", headers={**alice.headers, "x-request-id": "trace-7"})
        assert resp.headers["x-request-id"] == "trace-7"

        # a live SSE stream carries one in its response head
        async with client.request(f"{BASE}/conversations/{con}/events?stream=true",
                                  headers={**alice.headers, "x-request-id": "trace-sse"}) as conn:
            await conn.send_complete()

            async def head():
                while conn.headers is None:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(head(), 30)
            assert conn.status_code == 200 and conn.headers["content-type"].startswith("text/event-stream")
            assert conn.headers["x-request-id"] == "trace-sse"
            await conn.disconnect()


def test_openapi_says_counters_are_ascii_decimal_strings():
    from api.shared.openapi import openapi_document

    doc = openapi_document(BASE)
    seen = 0
    for path, names in QUERY_ROUTES:
        template = re.sub(r"(spc|con|op)-[0-9]+-[0-9]+", lambda m: {"spc": "{space}", "con": "{con}",
                                                                   "op": "{op}"}[m.group(1)], path)
        template = template.replace(OBJ, "{object}")
        params = {q["name"]: q for q in doc["paths"][template]["get"]["parameters"] if q["in"] == "query"}
        for name in names:
            schema = params[name]["schema"]
            assert schema["type"] == "string" and schema["pattern"] == "^(0|[1-9][0-9]*)$", (path, name)
            assert schema["maxLength"] == 20
            seen += 1
    assert seen == 14
