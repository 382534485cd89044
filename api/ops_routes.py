"""Operational routes: health, model list, Prometheus metrics and the same figures as JSON."""
from __future__ import annotations

from quart import Blueprint, Response, current_app, jsonify

from api.metrics_registry import CONTENT_TYPE, render_metrics
from api.shared.common import EXT as SHARED_EXT
from api.metrics_text import stats_document

blueprint = Blueprint("ops", __name__)


def _service():
    return current_app.extensions["aotx"]


def _model_object(service) -> dict:
    return {"id": service.model_id, "object": "model", "created": service.created,
            "owned_by": "aotx", "context_length": service.context_length,
            # extension: what a request that names no temperature / top_p gets (aotx.sampling_defaults)
            "sampling_defaults": service.sampling_defaults.json()}


@blueprint.get("/health")
async def health():
    service = _service()
    return jsonify({"status": "ok", "model": service.model_id, "backend": service.backend_name})


@blueprint.get("/v1/models")
async def list_models():
    return jsonify({"object": "list", "data": [_model_object(_service())]})


@blueprint.get("/v1/models/<path:model>")
async def get_model(model: str):
    service = _service()
    if not service.known_model(model):
        from api.errors import ApiError
        raise ApiError(404, f"The model '{model}' does not exist", param="model",
                       code="model_not_found")
    return jsonify(_model_object(service))


@blueprint.get("/metrics")
async def metrics():
    shared = current_app.extensions.get(SHARED_EXT) or {}
    return Response(render_metrics(_service(), shared.get("runtime")), content_type=CONTENT_TYPE)


WORKERS_EXT = "aotx.http_workers"   # `aotx serve --http-workers N`: a callable giving the workers' figures


@blueprint.get("/v1/stats")
async def stats():
    doc = stats_document(_service())
    workers = current_app.extensions.get(WORKERS_EXT)
    if workers is not None:
        doc["http_workers"] = workers()
    return jsonify(doc)
