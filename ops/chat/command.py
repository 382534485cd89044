"""`aotx chat` flags and its start: the server, the model, the token; then the plain or the shared chat."""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import httpx

TOKEN_ENV = "AOTX_API_KEY"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", default="http://127.0.0.1:8080", help="the server (default http://127.0.0.1:8080)")
    p.add_argument("--model", help="the model (default: the first of GET /v1/models)")
    p.add_argument("--token-file", help=f"a file holding the bearer token (default ${TOKEN_ENV}; on loopback the "
                                        "model surfaces take any key, the shared routes need a principal's token, "
                                        "e.g. var/tokens/alice)")
    p.add_argument("--max-tokens", type=int, default=None, help="most tokens per answer (default: the server's)")
    p.add_argument("--space", help="shared: the space (with no --conversation a new conversation is created in it)")
    p.add_argument("--conversation", help="shared: join this conversation (con-...)")


def token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        return Path(args.token_file).read_text(encoding="utf-8").strip()
    return os.environ.get(TOKEN_ENV) or None


def run(args: argparse.Namespace) -> int:
    try:
        bearer = token(args)
    except OSError as exc:
        print(f"aotx chat: cannot read the token file: {exc}", file=sys.stderr)
        return 2
    shared = bool(args.space or args.conversation)
    if shared and not bearer:
        print(f"aotx chat: --space / --conversation need a principal's token: --token-file FILE or ${TOKEN_ENV}",
              file=sys.stderr)
        return 2
    if args.max_tokens is not None and args.max_tokens < 1:
        print("aotx chat: --max-tokens must be at least 1", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_chat(args, bearer, shared))
    except KeyboardInterrupt:
        return 130


async def _chat(args: argparse.Namespace, bearer: str | None, shared: bool) -> int:
    from .plain import plain_chat
    from .shared import shared_chat

    headers = {"Authorization": f"Bearer {bearer or 'aotx-chat'}"}
    async with httpx.AsyncClient(base_url=args.base_url.rstrip("/"), headers=headers,
                                 timeout=httpx.Timeout(120.0, connect=10.0)) as client:
        try:
            model = args.model or await _first_model(client)
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            print(f"aotx chat: no model list at {args.base_url}/v1/models: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 1
        if shared:
            return await shared_chat(client, model, args.max_tokens, args.conversation, args.space)
        return await plain_chat(client, model, args.max_tokens)


async def _first_model(client: httpx.AsyncClient) -> str:
    r = await client.get("/v1/models")
    r.raise_for_status()
    return r.json()["data"][0]["id"]
