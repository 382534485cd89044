"""POST /v1/conversations, GET / POST (metadata) / DELETE /v1/conversations/{id}: OpenAI's objects
(`conversation`, `conversation.deleted`). Everything is the caller's own (api.stored_access): another
caller's id answers 404, exactly as an unknown one. Bad input — metadata past OpenAI's bounds (16 pairs,
keys ≤ 64, values strings ≤ 512), more than 20 items at once, malformed items — is a 400 and stores nothing.
"""
from __future__ import annotations

import time

from aotx.stored import CreateConversation, DeleteConversation, UpdateConversation
from aotx.stored.queries import ConversationView
from api.errors import OPENAI, ApiError
from api.ids import new_id
from api.stored_access import caller_identity
from api.stored_http import check_metadata, checked, read_port, require_port
from api.surfaces.response_items import as_items
from api.surfaces.route_kit import json_body, json_response, surface_blueprint

blueprint = surface_blueprint("conversations", OPENAI)
MAX_ITEMS_AT_ONCE = 20   # OpenAI's: "You may add up to 20 items at a time."


def conversation_object(view: ConversationView) -> dict:
    return {"id": view.id, "object": "conversation", "created_at": view.created_at, "metadata": view.metadata}


def new_items(body: dict, taken=(), *, required: bool = False) -> list[dict]:
    raw = body.get("items")
    if raw is None and not required:
        return []
    if not isinstance(raw, list) or (required and not raw):
        raise ApiError(400, "'items' must be a non-empty array of items." if required else
                       "'items' must be an array of items.", param="items")
    if len(raw) > MAX_ITEMS_AT_ONCE:
        raise ApiError(400, f"'items' has {len(raw)} items; at most {MAX_ITEMS_AT_ONCE} can be added at a time.",
                       param="items")
    return as_items(raw, "items", taken, allow_empty=True)


@blueprint.post("/v1/conversations")
async def create_conversation():
    body = await json_body()
    metadata = check_metadata(body.get("metadata"))
    items = new_items(body)
    port = require_port()
    identity = caller_identity()
    conversation_id = new_id("conv_")
    checked(await port.record(identity, CreateConversation(conversation_id, int(time.time()), metadata, items)))
    return json_response(conversation_object(checked(await port.reads.conversation(identity, conversation_id))))


@blueprint.get("/v1/conversations/<conversation_id>")
async def retrieve_conversation(conversation_id: str):
    port = read_port()
    return json_response(conversation_object(checked(await port.reads.conversation(caller_identity(), conversation_id))))


@blueprint.post("/v1/conversations/<conversation_id>")
async def update_conversation(conversation_id: str):
    port = read_port()
    identity = caller_identity()
    checked(await port.reads.conversation(identity, conversation_id))
    body = await json_body()
    if "metadata" not in body:
        raise ApiError(400, "'metadata' is required.", param="metadata")
    metadata = check_metadata(body.get("metadata"))
    checked(await port.record(identity, UpdateConversation(conversation_id, metadata)))
    return json_response(conversation_object(checked(await port.reads.conversation(identity, conversation_id))))


@blueprint.delete("/v1/conversations/<conversation_id>")
async def delete_conversation(conversation_id: str):
    port = read_port()
    identity = caller_identity()
    checked(await port.reads.conversation(identity, conversation_id))
    checked(await port.record(identity, DeleteConversation(conversation_id)))
    return json_response({"id": conversation_id, "object": "conversation.deleted", "deleted": True})
