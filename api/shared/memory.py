"""Retained memory: a space's rows, one object with its payload, and publication into a space."""

from __future__ import annotations

from quart import Blueprint

from aotx.state import MutationKind

from .common import actor, answer, query_int, runtime, space_list
from .mutations import mutate


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/spaces/<space>/memory", "memory", space_list("memory"), methods=["GET"])
    bp.add_url_rule("/spaces/<space>/publications", "publish", mutate(MutationKind.PUBLISH), methods=["POST"])

    @bp.get("/memory/<obj>")
    async def memory_object(obj: str):
        return answer(await runtime().query("memory_object", actor(), object=obj, offset=query_int("offset", 0)))
