"""OpenAI Responses: request parsing, stream projector, buffered builder, route."""
from api.surfaces.responses.routes import blueprint

__all__ = ["blueprint"]
