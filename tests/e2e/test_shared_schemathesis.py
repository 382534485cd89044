"""schemathesis against our own OpenAPI document of /aotx/v1/shared, on the real server:
whatever it sends, the gateway answers without a server error, in JSON."""
from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error


@pytest.fixture(scope="module")
def alice_token(server) -> str:
    return (server.var / "tokens" / "alice").read_text().strip()


@pytest.fixture(scope="module")
def shared_schema(server, alice_token):
    return schemathesis.openapi.from_url(f"{server.base_url}/aotx/v1/shared/openapi.json",
                                         headers={"Authorization": f"Bearer {alice_token}"})


def test_openapi_document_lists_every_shared_route(server, alice_token):
    doc = httpx.get(f"{server.base_url}/aotx/v1/shared/openapi.json",
                    headers={"Authorization": f"Bearer {alice_token}"}).json()
    paths = set(doc["paths"])
    for route in ("/capabilities", "/participant", "/participant/retirements", "/spaces",
                  "/spaces/{space}", "/spaces/{space}/members", "/spaces/{space}/conversations",
                  "/conversations/{con}", "/operations/{op}", "/conversations/{con}/inputs",
                  "/conversations/{con}/cancellations", "/operations/{op}/result", "/operations/{op}/events",
                  "/conversations/{con}/events"):
        assert any(p.endswith(route) for p in paths), route


def test_no_server_errors_under_fuzzing(server, shared_schema, alice_token):
    headers = {"Authorization": f"Bearer {alice_token}"}
    checked = 0
    statuses: dict[int, int] = {}
    for result in shared_schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=12, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def fuzz(case):
            response = case.call(base_url=f"{server.base_url}/aotx/v1/shared", headers=headers)
            case.validate_response(response, checks=(not_a_server_error,))
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            content_type = response.headers.get("content-type") or [""]
            assert content_type[0].startswith("application/json"), (case, response.status_code)

        fuzz()
        checked += 1
    assert checked >= 9
    # the fuzzer gets past authentication, into validation and the routes themselves
    assert statuses.get(200, 0) > 0 and statuses.get(400, 0) > 0, statuses
    assert statuses.get(401, 0) < sum(statuses.values()) / 2, statuses
    print("schemathesis statuses:", dict(sorted(statuses.items())))
