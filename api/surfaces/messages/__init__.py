"""Anthropic Messages: request parsing, stream projector, buffered builder, routes."""
from api.surfaces.messages.routes import blueprint

__all__ = ["blueprint"]
