"""GET /v1/openapi.json, the OpenAPI 3.1 document of the stored routes and of Idempotency-Key: it is a valid
document, it names exactly the app's stored routes, and schemathesis over it — in process, the real app
(api.app.create_app) over a tape-replaying service and a real runtime's stored port on a real nats-server —
finds no server error and no answer the document does not describe (status, content type, headers, body)."""
from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from api.app import create_app
from api.settings import GatewaySettings, token_digest
from api.stored_access import attach_stored
from api.surfaces.openapi import openapi_document
from tests.api.fake_service import FakeService

ORIGIN = "http://gateway"
HEADERS = {"Authorization": "Bearer key-a"}
STORED = ("/v1/responses", "/v1/conversations")
KEYED = ("/v1/chat/completions", "/v1/completions", "/v1/messages")   # Idempotency-Key; their bodies not described
SESSION = pytest.mark.asyncio(loop_scope="session")    # the stored-surface fixtures' loop
CHECKS = (not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance)


class Service(FakeService):
    backend_name = "fake"


def full_app(port):
    app = create_app(Service(), GatewaySettings())
    attach_stored(app, port)
    return app


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule)


def test_the_document_is_valid_openapi_3_1():
    doc = openapi_document()
    OPENAPI_31_VALIDATOR.validate(doc)
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    schemathesis.openapi.from_dict(doc).validate()


@SESSION
async def test_the_document_is_served_and_names_exactly_the_stored_routes(runtime):
    app = full_app(runtime.stored)
    routes: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(STORED):
            routes.setdefault(_openapi_path(rule.rule), set()).update(
                m.lower() for m in rule.methods if m not in ("HEAD", "OPTIONS"))
    r = await app.test_client().get("/v1/openapi.json")      # loopback: no token, as the other model routes
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = await r.get_json()
    assert doc == openapi_document()
    documented = {path: set(ops) for path, ops in doc["paths"].items() if path.startswith(STORED)}
    assert documented == routes
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"):
        names = [p["name"] for p in doc["paths"][path]["post"]["parameters"]]
        assert "Idempotency-Key" in names, path
        for code in ("409", "422"):
            assert code in doc["paths"][path]["post"]["responses"], (path, code)
    assert doc["paths"]["/v1/messages"]["post"]["responses"]["422"]["content"]["application/json"]["schema"] == \
        {"$ref": "#/components/schemas/AnthropicError"}


async def test_off_loopback_the_document_needs_a_token_as_the_other_model_routes():
    settings = GatewaySettings(host="0.0.0.0", token_digests={token_digest("s3cret"): "alice"})
    client = create_app(Service(), settings).test_client()
    r = await client.get("/v1/openapi.json")
    assert r.status_code == 401 and (await r.get_json())["error"]["code"] == "invalid_api_key"
    r = await client.get("/v1/openapi.json", headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200 and (await r.get_json())["openapi"] == "3.1.0"


KNOWN = [   # (method, path, path params, query, headers, body, status): answers the fuzzer reaches only by luck
    ("POST", "/v1/responses", {}, {}, {}, {"model": Service.model_id, "input": "hi", "stream": True}, 200),
    ("POST", "/v1/responses", {}, {}, {}, {"model": Service.model_id, "input": "hi", "background": True}, 200),
    ("GET", "/v1/responses/{response_id}", {"response_id": "BG"}, {"stream": "true", "starting_after": "0"}, {},
     None, 200),
    ("POST", "/v1/responses/{response_id}/cancel", {"response_id": "BG"}, {}, {}, None, 200),
    ("POST", "/v1/responses/{response_id}/cancel", {"response_id": "FG"}, {}, {}, None, 400),
    ("GET", "/v1/responses/{response_id}/input_items", {"response_id": "FG"}, {"limit": "1", "order": "asc"}, {},
     None, 200),
    ("POST", "/v1/responses", {}, {}, {"Idempotency-Key": "\x01"}, {"model": Service.model_id, "input": "hi"}, 400),
    ("POST", "/v1/responses", {}, {}, {}, {"model": Service.model_id, "previous_response_id": "resp_x",
                                          "input": "hi"}, 404),
    ("POST", "/v1/conversations/{conversation_id}/items", {"conversation_id": "CONV"}, {}, {},
     {"items": [{"type": "message", "role": "user", "content": "more"}]}, 200),
    ("DELETE", "/v1/conversations/{conversation_id}/items/{item_id}", {"conversation_id": "CONV", "item_id": "ITEM"},
     {}, {}, None, 200),
    ("DELETE", "/v1/responses/{response_id}", {"response_id": "FG"}, {}, {}, None, 200),
    ("GET", "/v1/responses/{response_id}", {"response_id": "FG"}, {}, {}, None, 404),
]
_KEYED_BODIES = {"/v1/chat/completions": {"model": Service.model_id, "messages": [{"role": "user", "content": "hi"}]},
                 "/v1/completions": {"model": Service.model_id, "prompt": "hi"},
                 "/v1/messages": {"model": Service.model_id, "max_tokens": 8,
                                  "messages": [{"role": "user", "content": "hi"}]},
                 "/v1/responses": {"model": Service.model_id, "input": "hi"}}
for _path, _body in _KEYED_BODIES.items():   # a first attempt, its replay (Idempotent-Replayed), another body: 422
    for _stream in (False, True):
        KNOWN += [("POST", _path, {}, {}, {"Idempotency-Key": f"k{_stream}"}, {**_body, "stream": _stream}, 200)] * 2
        KNOWN += [("POST", _path, {}, {}, {"Idempotency-Key": f"k{_stream}"}, {**_body, "stream": _stream,
                                                                                "temperature": 0.5}, 422)]


@SESSION
async def test_known_requests_get_the_documented_answers(runtime):
    schema = schemathesis.openapi.from_dict(openapi_document())
    app = full_app(runtime.stored)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        seeded = await _seed(http)
        ids = {"FG": seeded["response_id"], "CONV": seeded["conversation_id"], "ITEM": seeded["item_id"]}
        replayed = 0
        for method, path, params, query, headers, body, status in KNOWN:
            operation = schema[path][method]
            case = operation.Case(path_parameters={k: ids.get(v, v) for k, v in params.items()} or None,
                                  query=query or None, headers={**HEADERS, **headers},
                                  **({"body": body} if body is not None else {}))
            kwargs = case.as_transport_kwargs(base_url=ORIGIN)
            r = await http.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                                   headers=kwargs.get("headers"), content=_content(kwargs))
            assert r.status_code == status, (method, path, body, r.text)
            case.validate_response(r, checks=CHECKS)
            replayed += r.headers.get("Idempotent-Replayed") == "true"
            if body and body.get("background"):
                ids["BG"] = r.json()["id"]
    assert replayed == 8


def _operations():
    schema = schemathesis.openapi.from_dict(openapi_document())
    ops = [result.ok() for result in schema.get_all_operations()]
    ops = [op for op in ops if op.path.startswith(STORED) or op.path in KEYED]
    return sorted(ops, key=lambda op: op.method.upper() == "DELETE")   # deletes last: the real ids live longer


def _cases(operation, mode: GenerationMode, count: int) -> list:
    out = []

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def gather(case):
        out.append(case)

    try:
        gather()
    except Unsatisfiable:     # nothing of this operation can be made invalid (a negative case of path ids only)
        assert mode is GenerationMode.NEGATIVE, operation.path
    return out


async def _seed(http) -> dict[str, str]:
    """Real ids for the path parameters: a stored response, a conversation with one item."""
    r = await http.post(f"{ORIGIN}/v1/responses", json={"model": Service.model_id, "input": "hi"}, headers=HEADERS)
    assert r.status_code == 200, r.text
    c = await http.post(f"{ORIGIN}/v1/conversations", json={"items": [{"role": "user", "content": "hello"}]},
                        headers=HEADERS)
    assert c.status_code == 200, c.text
    items = (await http.get(f"{ORIGIN}/v1/conversations/{c.json()['id']}/items", headers=HEADERS)).json()
    return {"response_id": r.json()["id"], "conversation_id": c.json()["id"], "item_id": items["data"][0]["id"]}


@SESSION
@pytest.mark.parametrize("examples", [6])
async def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(runtime, examples):
    operations = _operations()
    assert len(operations) == 16, [(op.method, op.path) for op in operations]
    statuses: dict[int, int] = {}
    app = full_app(runtime.stored)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        real = await _seed(http)
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                for case in _cases(operation, mode, examples):
                    for ids in (None, real):   # as generated, then on real ids and the served model
                        if ids is not None and not _make_real(case, ids):
                            continue
                        kwargs = case.as_transport_kwargs(base_url=ORIGIN, headers=HEADERS)
                        r = await http.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                                               headers=kwargs.get("headers"), content=_content(kwargs))
                        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                        assert r.status_code < 500, (operation.path, case.query, case.body, r.text)
                        case.validate_response(r, checks=CHECKS)
    assert statuses.get(200, 0) > 0 and statuses.get(400, 0) > 0 and statuses.get(404, 0) > 0, statuses
    print("schemathesis statuses:", dict(sorted(statuses.items())))


def _make_real(case, ids: dict[str, str]) -> bool:
    """Point the case at real resources (its path ids) and the served model; False when nothing changes."""
    changed = False
    if case.path_parameters:
        case.path_parameters = {k: ids[k] for k in case.path_parameters}
        changed = True
    if isinstance(case.body, dict) and "model" in case.body:
        case.body = {**case.body, "model": Service.model_id}
        changed = True
    return changed


def _content(kwargs) -> bytes | None:
    if "json" in kwargs:
        return json.dumps(kwargs["json"]).encode()
    return kwargs.get("content") or kwargs.get("data")


@SESSION
@pytest.mark.parametrize("status", [["x"], 7, "done", {}])
async def test_an_item_status_that_is_not_an_item_status_is_a_400_and_stores_nothing(runtime, status):
    """Found by the fuzz above: an added item's `status` was kept as sent (an array, a number), so the stored
    item was no OpenAI item. It is one of in_progress | completed | incomplete, or absent (then completed)."""
    app = full_app(runtime.stored)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        conv = (await http.post(f"{ORIGIN}/v1/conversations", json={}, headers=HEADERS)).json()["id"]
        item = {"type": "function_call_output", "call_id": "c1", "output": "ok", "status": status}
        for url, body in ((f"{ORIGIN}/v1/conversations/{conv}/items", {"items": [item]}),
                          (f"{ORIGIN}/v1/conversations", {"items": [item]}),
                          (f"{ORIGIN}/v1/responses", {"model": Service.model_id, "input": [item]})):
            r = await http.post(url, json=body, headers=HEADERS)
            assert r.status_code == 400, (url, r.text)
            assert r.json()["error"]["param"] == ("items[0].status" if "items" in body else "input[0].status")
        listed = (await http.get(f"{ORIGIN}/v1/conversations/{conv}/items", headers=HEADERS)).json()
        assert listed["data"] == []
