"""OpenAI legacy Completions: request parsing, stream projector, buffered builder, route."""
from api.surfaces.completions.routes import blueprint

__all__ = ["blueprint"]
