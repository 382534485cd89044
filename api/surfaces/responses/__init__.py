"""OpenAI Responses: request parsing, stream projector, buffered builder, route; stored responses' reads."""
from api.surfaces.responses import stored_routes  # noqa: F401  (GET / DELETE /v1/responses/{id}…, same blueprint)
from api.surfaces.responses.routes import blueprint

__all__ = ["blueprint"]
