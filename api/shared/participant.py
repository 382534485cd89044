"""The participant's own routes, what the server offers (capabilities) and the OpenAPI document."""

from __future__ import annotations

from typing import Any, Mapping

from quart import Blueprint, request

from aotx.journal import LeaseRevision
from aotx.state import SCHEMA, MutationKind

from .common import BASE_PATH, actor, answer, json_answer, runtime, shared
from .mutations import mutate
from .openapi import openapi_document


def register(bp: Blueprint, models: tuple[Mapping[str, Any], ...], page_grant: int | None) -> None:
    @bp.get("/capabilities")
    async def capabilities():
        described = await runtime().describe()
        execution = described.get("execution")
        return json_answer(200, {
            "schemas": {"mutation": SCHEMA},
            "base_path": BASE_PATH,
            "models": execution["models"] if execution else list(models),
            "page_grant": execution["page_grant"] if execution else page_grant,
            "routes": {"inputs": execution is not None, "cancellations": execution is not None,
                       "operation_results": True, "operation_events": True, "memory": True,
                       "publications": True, "media": shared()["media"] is not None,
                       "conversation_events": True},
            "limits": described.get("limits"),
            "lease_revisions": [int(r) for r in LeaseRevision],
            "identifiers": {"space": "spc-{lineage}-{id}", "conversation": "con-{lineage}-{id}",
                            "operation": "op-{lineage}-{id}", "participant": "par-{lineage}-{id}"},
            "journal": described.get("journal"),
        })

    @bp.get("/participant")
    async def participant():
        return answer(await runtime().query("participant", actor(), participant=request.args.get("participant")))

    @bp.get("/openapi.json")
    async def openapi():
        return json_answer(200, openapi_document(BASE_PATH))

    bp.add_url_rule("/participant", "register", mutate(MutationKind.REGISTER), methods=["POST"])
    bp.add_url_rule("/participant/retirements", "retire", mutate(MutationKind.RETIRE), methods=["POST"])
