"""Spaces, their members and conversations, and what is posted to a conversation (inputs, cancellations)."""

from __future__ import annotations

from quart import Blueprint

from aotx.state import MutationKind

from .common import actor, answer, query_int, read, runtime, space_list
from .mutations import mutate


def register(bp: Blueprint) -> None:
    @bp.get("/spaces")
    async def spaces():
        return answer(await runtime().query("spaces", actor(), cursor=query_int("cursor", 0),
                                            limit=query_int("limit", 100)))

    bp.add_url_rule("/spaces", "create_space", mutate(MutationKind.CREATE_SPACE), methods=["POST"])
    bp.add_url_rule("/spaces/<space>", "space", read("space"), methods=["GET"])
    for view in ("members", "conversations"):
        bp.add_url_rule(f"/spaces/<space>/{view}", view, space_list(view), methods=["GET"])
    bp.add_url_rule("/spaces/<space>/members", "set_member", mutate(MutationKind.SET_MEMBER), methods=["POST"])
    bp.add_url_rule("/spaces/<space>/conversations", "create_conversation",
                    mutate(MutationKind.CREATE_CONVERSATION), methods=["POST"])
    bp.add_url_rule("/conversations/<con>", "conversation", read("conversation"), methods=["GET"])
    bp.add_url_rule("/conversations/<con>/inputs", "input", mutate(MutationKind.INPUT), methods=["POST"])
    bp.add_url_rule("/conversations/<con>/cancellations", "cancel", mutate(MutationKind.CANCEL), methods=["POST"])
