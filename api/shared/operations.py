"""An operation's receipt and its result bytes by offset (its event stream: streams.py)."""

from __future__ import annotations

from quart import Blueprint, request

from .common import actor, answer, query_int, read, runtime


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/operations/<op>", "operation", read("operation"), methods=["GET"])

    @bp.get("/operations/<op>/result")
    async def operation_result(op: str):
        limit = request.args.get("limit")
        return answer(await runtime().query("result", actor(), op=op, offset=query_int("offset", 0),
                                            limit=None if limit is None else query_int("limit", 0)))
