"""schemathesis against our own OpenAPI document, for the shared routes that read counters from the query
string (cursor, limit, offset), in-process over a real nats-server: positive cases (ASCII decimal strings,
as the document says) and negative ones (anything else). Never a server error; every counter that is not
a canonical ASCII decimal string is a 400 in the shared envelope."""
from __future__ import annotations

import re

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode

from api.shared.openapi import openapi_document

from .harness import BASE, TOKENS, fresh_spec, shared_app

COUNTERS = ("cursor", "limit", "offset")
CANONICAL = re.compile(r"0|[1-9][0-9]{0,19}")
ORIGIN = "http://gateway"


def counter_operations():
    schema = schemathesis.openapi.from_dict(openapi_document(BASE))
    out = []
    for result in schema.get_all_operations():
        operation = result.ok()
        names = {p.name for p in operation.query}
        if operation.method.upper() == "GET" and names & set(COUNTERS):
            out.append(operation)
    return out


def generated_cases(operation, mode: GenerationMode, count: int) -> list:
    cases = []

    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def gather(case):
        cases.append(case)

    gather()
    return cases


async def test_query_counters_never_a_server_error(nats_url):
    operations = counter_operations()
    assert len(operations) == 8, [op.path for op in operations]
    statuses: dict[int, int] = {}
    async with shared_app(nats_url, fresh_spec()) as (_, _parties, client):
        headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport) as http:
            for operation in operations:
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                    for case in generated_cases(operation, mode, 15):
                        kwargs = case.as_transport_kwargs(base_url=ORIGIN + BASE, headers=headers)
                        r = await http.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                                               headers=kwargs.get("headers"))
                        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                        assert r.status_code < 500, (mode, operation.path, case.query, r.text)
                        assert r.headers["content-type"].startswith("application/json"), (operation.path, r.text)
                        body = r.json()
                        if r.status_code >= 400:
                            assert set(body) == {"error", "request_id"} and isinstance(body["error"]["message"], str), body
                        # what the route reads: the first value of each counter, as sent on the wire
                        sent = r.request.url.params
                        bad = [k for k in COUNTERS if k in sent and not CANONICAL.fullmatch(sent[k])]
                        if bad:
                            routed_elsewhere = r.status_code == 404 and "no shared route" in body["error"]["message"]
                            assert r.status_code == 400 or routed_elsewhere, (operation.path, dict(sent), body)
                        if mode is GenerationMode.POSITIVE and r.status_code == 400:
                            # what the document calls valid, the route takes
                            assert "query parameter" not in body["error"]["message"], (operation.path, dict(sent))
    # the generator reaches both sides: accepted counters (200, or 404 for unknown resources) and 400s
    assert statuses.get(400, 0) > 0 and (statuses.get(200, 0) + statuses.get(404, 0)) > 0, statuses
    print("schemathesis statuses:", dict(sorted(statuses.items())))
