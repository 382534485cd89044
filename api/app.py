"""The Quart gateway: auth, native error envelopes, the four wire surfaces and ops routes."""
from __future__ import annotations

import logging

from quart import Quart, request

from api import ops_routes, web_routes
from api.app_common import install_common
from api.auth import authenticated
from api.drain import Drain, EXT as DRAIN_EXT
from api.errors import ApiError, shutting_down
from api.request_ids import current_request_id
from api.settings import GatewaySettings

log = logging.getLogger("aotx.gateway")


def _surface_blueprints():
    from api.surfaces import chat, completions, conversations, messages, openapi, responses
    return (chat.blueprint, completions.blueprint, messages.blueprint, responses.blueprint,
            conversations.blueprint, openapi.blueprint)


def create_app(service, settings: GatewaySettings | None = None) -> Quart:
    settings = settings or GatewaySettings()
    app = Quart("aotx", static_folder=None)   # /static/ is the page's (api.web_routes), not Flask's default
    app.config["AOTX_SETTINGS"] = settings
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    app.extensions["aotx"] = service
    # the shutdown drain (api.drain): ops/shutdown.py begins it on SIGTERM
    drain = app.extensions[DRAIN_EXT] = Drain(grace=settings.shutdown_grace, stop_engine=service.stop,
                                              busy=getattr(service, "busy", lambda: False))

    install_common(app)

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception):
        log.exception("unhandled error", extra={"fields": {"path": request.path,
                                                           "request_id": current_request_id()}})
        from api.errors import envelope_for_path, error_response
        return error_response(ApiError(500, "internal server error"), envelope_for_path(request.path))

    @app.before_request
    async def _refuse_while_draining():
        if drain.draining:
            raise shutting_down()

    @app.before_request
    async def _auth():
        if not authenticated():
            raise ApiError(401, "A valid bearer token is required.", code="invalid_api_key")

    @app.before_serving
    async def _start():
        service.start()

    @app.after_serving
    async def _stop():
        await drain.finish()   # the grace, then the engine stops: what still runs ends with its native error
        await service.stop()

    app.register_blueprint(ops_routes.blueprint)
    app.register_blueprint(web_routes.make_blueprint())   # the page at / and /stats (no token needed)
    for bp in _surface_blueprints():
        app.register_blueprint(bp)
    return app


def create_shared_gateway(runtime, principals, settings: GatewaySettings | None = None, *,
                          runtime_name: str = "main") -> Quart:
    """A lone gateway: /health and /aotx/v1/shared only (forwarded to a runtime over NATS).

    The model surfaces are not served here; `aotx serve` serves them with the model loaded.
    """
    from quart import jsonify

    from api.shared import attach_shared

    settings = settings or GatewaySettings()
    app = Quart("aotx-gateway", static_folder=None)
    app.config["AOTX_SETTINGS"] = settings
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    install_common(app)

    @app.get("/health")
    async def _health():
        return jsonify({"status": "ok", "role": "gateway", "serves": ["/aotx/v1/shared"],
                        "runtime": runtime_name, "runtime_connected": runtime.started})

    attach_shared(app, runtime, principals)
    app.register_blueprint(web_routes.make_blueprint())   # the page works here too (its /stats shows /health)
    return app
