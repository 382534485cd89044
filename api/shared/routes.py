"""The blueprint: every shared route, authenticated, answering JSON with Cache-Control: no-store."""

from __future__ import annotations

from typing import Any, Mapping

from quart import Blueprint, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from aotx.journal import LeaseRevision
from aotx.runtime import GrantedRuntime, Outcome, RemoteRuntime, SharedRuntime
from aotx.state import SCHEMA, MutationKind, Refusal

from .auth import Principal, bearer, token_sha256
from .openapi import openapi_document

BASE_PATH = "/aotx/v1/shared"
_EXT = "aotx_shared"
_DECIMAL_MAX = 20


def _json(status: int, body: Mapping[str, Any]):
    response = jsonify(body)
    response.status_code = status
    return response


def _error(status: int, type_: str, message: str):
    return _json(status, {"error": {"type": type_, "message": message}})


def _answer(result: Any):
    if isinstance(result, Refusal):
        return _json(result.status, result.error())
    if isinstance(result, Outcome):
        return _json(result.status, result.body)
    return _json(200, result)


class _BadQuery(ValueError):
    pass


def _query_int(name: str, default: int) -> int:
    text = request.args.get(name)
    if text is None:
        return default
    if not text.isdigit() or len(text) > _DECIMAL_MAX or (len(text) > 1 and text[0] == "0"):
        raise _BadQuery(f"query parameter {name} must be a canonical decimal string, got {text!r}")
    return int(text)


def make_blueprint(models: tuple[Mapping[str, Any], ...] = (), page_grant: int | None = None) -> Blueprint:
    bp = Blueprint("aotx_shared", __name__, url_prefix=BASE_PATH)

    def ctx() -> tuple[SharedRuntime | GrantedRuntime | RemoteRuntime, Mapping[str, Principal]]:
        ext = current_app.extensions[_EXT]
        return ext["runtime"], ext["principals"]

    @bp.before_request
    async def _authenticate():
        runtime, principals = ctx()
        token = bearer(request.headers.get("Authorization"))
        principal = principals.get(token_sha256(token)) if token else None
        if principal is None:
            response = _error(401, "unauthorized", "a valid bearer token is required")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        g.shared_actor = principal.actor
        if not runtime.started:
            return _error(503, "unavailable", "the shared runtime is still booting")
        return None

    @bp.after_request
    async def _no_store(response):
        response.headers["Cache-Control"] = "no-store"
        return response

    @bp.errorhandler(_BadQuery)
    async def _bad_query(exc: _BadQuery):
        return _error(400, "invalid_request", str(exc))

    @bp.errorhandler(HTTPException)
    async def _http(exc: HTTPException):
        return _error(exc.code or 500, exc.name.lower().replace(" ", "_"), exc.description or exc.name)

    def read(view: str):
        async def handler(**kwargs: Any):
            runtime, _ = ctx()
            return _answer(await runtime.query(view, g.shared_actor, **kwargs))
        return handler

    def mutate(kind: MutationKind):
        async def handler(space: str | None = None):
            runtime, _ = ctx()
            raw = await request.get_data(cache=False, as_text=False)
            return _answer(await runtime.submit(g.shared_actor, kind, raw, space))
        return handler

    @bp.get("/capabilities")
    async def capabilities():
        runtime, _ = ctx()
        described = await runtime.describe()
        return _json(200, {
            "schemas": {"mutation": SCHEMA},
            "base_path": BASE_PATH,
            "models": list(models),
            "page_grant": page_grant,
            "routes": {"inputs": False, "cancellations": False, "memory": False, "publications": False,
                       "media": False, "events": False},
            "limits": described.get("limits"),
            "lease_revisions": [int(r) for r in LeaseRevision],
            "identifiers": {"space": "spc-{lineage}-{id}", "conversation": "con-{lineage}-{id}",
                            "operation": "op-{lineage}-{id}", "participant": "par-{lineage}-{id}"},
            "journal": described.get("journal"),
        })

    @bp.get("/participant")
    async def participant():
        runtime, _ = ctx()
        return _answer(await runtime.query("participant", g.shared_actor, participant=request.args.get("participant")))

    @bp.get("/spaces")
    async def spaces():
        runtime, _ = ctx()
        return _answer(await runtime.query("spaces", g.shared_actor, cursor=_query_int("cursor", 0),
                                           limit=_query_int("limit", 100)))

    @bp.get("/spaces/<space>/members")
    async def members(space: str):
        runtime, _ = ctx()
        return _answer(await runtime.query("members", g.shared_actor, space=space, cursor=_query_int("cursor", 0),
                                           limit=_query_int("limit", 100)))

    @bp.get("/spaces/<space>/conversations")
    async def conversations(space: str):
        runtime, _ = ctx()
        return _answer(await runtime.query("conversations", g.shared_actor, space=space,
                                           cursor=_query_int("cursor", 0), limit=_query_int("limit", 100)))

    @bp.get("/openapi.json")
    async def openapi():
        return _json(200, openapi_document(BASE_PATH))

    bp.add_url_rule("/spaces/<space>", "space", read("space"), methods=["GET"])
    bp.add_url_rule("/conversations/<con>", "conversation",
                    read("conversation"), methods=["GET"])
    bp.add_url_rule("/operations/<op>", "operation", read("operation"),
                    methods=["GET"])
    bp.add_url_rule("/participant", "register", mutate(MutationKind.REGISTER), methods=["POST"])
    bp.add_url_rule("/participant/retirements", "retire", mutate(MutationKind.RETIRE), methods=["POST"])
    bp.add_url_rule("/spaces", "create_space", mutate(MutationKind.CREATE_SPACE), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/members", "set_member", mutate(MutationKind.SET_MEMBER), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/conversations", "create_conversation",
                    mutate(MutationKind.CREATE_CONVERSATION), methods=["POST"])

    @bp.route("/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown(rest: str):
        return _error(404, "not_found", f"no shared route {BASE_PATH}/{rest}")

    return bp
