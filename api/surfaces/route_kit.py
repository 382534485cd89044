"""What every surface route shares: the service, the JSON body, native error rendering."""
from __future__ import annotations

from quart import Blueprint, Response, current_app, request

from aotx import strict_json
from api.errors import ApiError, error_response
from api.fields import parse_json_object


def service():
    return current_app.extensions["aotx"]


async def json_body() -> dict:
    return parse_json_object(await request.get_data())


def json_response(obj: dict) -> Response:
    return Response(strict_json.dumps(obj), status=200,
                    content_type="application/json")


def surface_blueprint(name: str, envelope: str) -> Blueprint:
    """A blueprint whose ApiErrors render in `envelope` (openai | anthropic)."""
    blueprint = Blueprint(name, __name__)

    @blueprint.errorhandler(ApiError)
    async def _render(err: ApiError):
        return error_response(err, envelope)

    return blueprint
