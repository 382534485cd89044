"""The nats users of a split deployment (`aotx boot` + `aotx gateway`) and their subject permissions.

* runtime (`aotx-runtime`): the only writer of the journal (its stream's subjects and the JetStream
  API) and of its snapshots (the object store `<stream>_SNAPSHOTS`), answers commands on `aotx.rt.<name>.cmd` (subscribe; replies through allow_responses) and
  on its own boot's `aotx.rt.<name>.boot.<boot>` (lease mode), writes its leases (`$KV.<stream>_OWNERS`) and
  announces `aotx.rt.<name>.changed`; it may not publish commands.
* gateway (`aotx-gateway`): the only sender of runtime commands (`aotx.rt.<name>.cmd`), hears
  `aotx.rt.<name>.changed`, keeps the media store; no journal subject and no JetStream API request
  but the media store's, so it can neither write, purge nor delete the journal.

EmbeddedNats(users=...) takes them as they are; for a NATS cluster of your own, README ("Who may talk
to the log") shows the same permissions as nats-server configuration.
"""
from __future__ import annotations

from aotx.runtime import changed_subject, rpc_subject
from aotx.runtime.ownership import lease_bucket_name
from aotx.runtime.rpc import boot_subject
from eventlog import MEDIA_BUCKET, NatsPermissions, NatsUser, StreamSpec, media_publish_subjects, snapshot_publish_subjects

RUNTIME_USER = "aotx-runtime"
GATEWAY_USER = "aotx-gateway"
INBOX = "_INBOX.>"   # replies to a client's own requests (JetStream API answers, acks, deliveries)


def runtime_permissions(name: str, spec: StreamSpec) -> NatsPermissions:
    return NatsPermissions(
        publish_allow=(*spec.subjects, *snapshot_publish_subjects(spec.name), "$JS.API.>", "$JS.FC.>", "$JS.ACK.>",
                       changed_subject(name), f"$KV.{lease_bucket_name(spec.name)}.>"),
        publish_deny=(rpc_subject("*"),),
        subscribe_allow=(rpc_subject(name), boot_subject(name, "*"), INBOX),
        allow_responses=True)


def gateway_permissions(name: str, spec: StreamSpec, media_bucket: str = MEDIA_BUCKET) -> NatsPermissions:
    return NatsPermissions(
        publish_allow=(rpc_subject(name), boot_subject(name, "*"), *media_publish_subjects(media_bucket)),
        publish_deny=(*spec.subjects, f"$JS.API.STREAM.*.{spec.name}", f"$JS.API.STREAM.*.{spec.name}.>"),
        subscribe_allow=(changed_subject(name), INBOX),
        subscribe_deny=(rpc_subject("*"),))


def split_users(name: str, spec: StreamSpec, media_bucket: str = MEDIA_BUCKET) -> tuple[NatsUser, NatsUser]:
    """(runtime, gateway) users of the runtime `name` whose journal is `spec`."""
    return (NatsUser(RUNTIME_USER, runtime_permissions(name, spec)),
            NatsUser(GATEWAY_USER, gateway_permissions(name, spec, media_bucket)))
