"""The nats users of a split deployment (`aotx boot` + `aotx gateway`) and their subject permissions.

* runtime (`aotx-runtime`): the only writer of the journal (its stream's subjects and the JetStream
  API) and of its snapshots (the object store `<stream>_SNAPSHOTS`), answers commands on
  `aotx.rt.<name>.cmd` (subscribe; replies to `aotx.rt.<name>.reply.>`, the gateways' inbox prefix, and
  through allow_responses) and on its own boot's `aotx.rt.<name>.boot.<boot>` (lease mode), writes its
  leases (`$KV.<stream>_OWNERS`) and announces `aotx.rt.<name>.changed`; it may not publish commands.
  Its boots' engines (`aotx.eng.<name>.<boot>`, aotx.engine_pool) take generations on `.gen`/`.ctl`,
  beat on `.alive` and send deltas to `.w.<worker>`.
* gateway (`aotx-gateway`): the only sender of runtime commands (`aotx.rt.<name>.cmd`), hears
  `aotx.rt.<name>.changed` and its answers on `aotx.rt.<name>.reply.>`, keeps the media store; no
  journal subject and no JetStream API request but the media store's, so it can neither write, purge
  nor delete the journal. With --model-surfaces it sends generations to the boots' engines and hears
  their beats and deltas.

EmbeddedNats(users=...) takes them as they are; for a NATS cluster of your own, README ("Who may talk
to the log") shows the same permissions as nats-server configuration.
"""
from __future__ import annotations

from aotx.engine_wire import alive_subject, ctl_subject, gen_subject, pool_engine_name, worker_inbox
from aotx.runtime import changed_subject, rpc_subject
from aotx.runtime.ownership import lease_bucket_name
from aotx.runtime.rpc import boot_subject, reply_prefix
from eventlog import MEDIA_BUCKET, NatsPermissions, NatsUser, StreamSpec, media_publish_subjects, snapshot_publish_subjects

RUNTIME_USER = "aotx-runtime"
GATEWAY_USER = "aotx-gateway"
INBOX = "_INBOX.>"   # replies to a client's own requests (JetStream API answers, acks, deliveries)


def _engines(name: str) -> str:
    """The engines of the runtime `name`'s boots (aotx.engine_wire.pool_engine_name), the boot a wildcard."""
    return pool_engine_name(name, "*")


def runtime_permissions(name: str, spec: StreamSpec) -> NatsPermissions:
    engines = _engines(name)
    return NatsPermissions(
        publish_allow=(*spec.subjects, *snapshot_publish_subjects(spec.name), "$JS.API.>", "$JS.FC.>", "$JS.ACK.>",
                       changed_subject(name), f"$KV.{lease_bucket_name(spec.name)}.>", f"{reply_prefix(name)}.>",
                       alive_subject(engines), worker_inbox(engines, ">")),
        publish_deny=(rpc_subject("*"),),
        subscribe_allow=(rpc_subject(name), boot_subject(name, "*"), INBOX, gen_subject(engines), ctl_subject(engines)),
        allow_responses=True)


def gateway_permissions(name: str, spec: StreamSpec, media_bucket: str = MEDIA_BUCKET) -> NatsPermissions:
    engines = _engines(name)
    return NatsPermissions(
        publish_allow=(rpc_subject(name), boot_subject(name, "*"), *media_publish_subjects(media_bucket),
                       gen_subject(engines), ctl_subject(engines)),
        publish_deny=(*spec.subjects, f"$JS.API.STREAM.*.{spec.name}", f"$JS.API.STREAM.*.{spec.name}.>"),
        subscribe_allow=(changed_subject(name), INBOX, f"{reply_prefix(name)}.>", alive_subject(engines),
                         worker_inbox(engines, ">")),
        subscribe_deny=(rpc_subject("*"),))


def split_users(name: str, spec: StreamSpec, media_bucket: str = MEDIA_BUCKET) -> tuple[NatsUser, NatsUser]:
    """(runtime, gateway) users of the runtime `name` whose journal is `spec`."""
    return (NatsUser(RUNTIME_USER, runtime_permissions(name, spec)),
            NatsUser(GATEWAY_USER, gateway_permissions(name, spec, media_bucket)))
