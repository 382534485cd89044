"""A conversation's items: GET / POST /v1/conversations/{id}/items (the list, with `after`, `limit` 1..100
and `order` asc | desc, default desc; POST adds `items`, at most 20 at once, and answers the list of those
added), GET / DELETE /v1/conversations/{id}/items/{item_id} (DELETE answers the conversation, as OpenAI's)."""
from __future__ import annotations

from aotx.stored import AddConversationItems, DeleteConversationItem
from api.stored_access import caller_identity
from api.stored_http import checked, page_args, page_object, read_port
from api.surfaces.conversations.routes import blueprint, conversation_object, new_items
from api.surfaces.route_kit import json_body, json_response


@blueprint.get("/v1/conversations/<conversation_id>/items")
async def list_items(conversation_id: str):
    port = read_port()
    page = checked(await port.reads.conversation_items(caller_identity(), conversation_id, **page_args()))
    return json_response(page_object(page))


@blueprint.post("/v1/conversations/<conversation_id>/items")
async def add_items(conversation_id: str):
    port = read_port()
    identity = caller_identity()
    present = checked(await port.reads.all_conversation_items(identity, conversation_id))
    items = new_items(await json_body(), [item["id"] for item in present], required=True)
    checked(await port.record(identity, AddConversationItems(conversation_id, items)))
    return json_response({"object": "list", "data": items, "first_id": items[0]["id"],
                          "last_id": items[-1]["id"], "has_more": False})


@blueprint.get("/v1/conversations/<conversation_id>/items/<item_id>")
async def retrieve_item(conversation_id: str, item_id: str):
    port = read_port()
    return json_response(checked(await port.reads.conversation_item(caller_identity(), conversation_id, item_id)))


@blueprint.delete("/v1/conversations/<conversation_id>/items/<item_id>")
async def delete_item(conversation_id: str, item_id: str):
    port = read_port()
    identity = caller_identity()
    checked(await port.reads.conversation_item(identity, conversation_id, item_id))
    checked(await port.record(identity, DeleteConversationItem(conversation_id, item_id)))
    return json_response(conversation_object(checked(await port.reads.conversation(identity, conversation_id))))
