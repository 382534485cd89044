"""OpenAI Conversations API (/v1/conversations…): conversations and their items, on the stored state."""
from api.surfaces.conversations import items  # noqa: F401  (the item routes, same blueprint)
from api.surfaces.conversations.routes import blueprint

__all__ = ["blueprint"]
