"""OpenAI Chat Completions: request -> ChatRequest, stream projector, buffered builder, route."""
from api.surfaces.chat.routes import blueprint

__all__ = ["blueprint"]
