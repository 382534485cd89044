"""The world the attacker tests probe: deployed like `aotx serve` (a gateway config file, deployment
grants issued from it, a GrantedRuntime, SIGHUP reload through ops.reload.serve_reloader), over a
real nats-server and the real model. Built once per module; the probes only read it or are refused.

alice owns a room R, an instance space I and a private space P, one conversation each, and has
said a secret in each (retained memory); she published R's secret into a room Q that mallory reads.
The attackers, each with a private space `home` (+ conversation) of their own:
  bob     was a member of R and I (read, write), said something in R, then was removed from both
  carol   zero-rights rows in I (blocked from implicit instance access) and in R
  dave    R member with read only          erin   R member with write only
  frank   R member with manage only
  gina    R member with every right; her shared_read grant was revoked by a reload
  hank    likewise, shared_write revoked    ivan   likewise, shared_manage revoked
  mallory another principal entirely (implicit instance access, reader of Q)
  nobody  holds every grant, never registered
  olga    a token with no shared action (the model surfaces' key); never registered
  stranger a bearer token the gateway does not know
sam, uma, vic and tess are left for the open-stream test, wendy for membership changes in I.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quart import Quart

from aotx.runtime import GrantedRuntime, SharedRuntime
from aotx.runtime_file import load_grants, write_grants
from api.gateway_config import load_gateway_config
from api.settings import GatewaySettings
from api.shared import attach_shared
from ops.reload import serve_reloader

from .harness import Party, fresh_spec
from .test_inputs import _wait

ALL = ("shared_manage", "shared_read", "shared_write")
ACTIONS: dict[str, tuple[str, ...]] = {
    **{name: ALL for name in ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivan",
                              "mallory", "nobody", "sam", "uma", "vic", "tess", "wendy")},
    "olga": (),
}
REGISTERED = ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivan", "mallory",
              "sam", "uma", "vic", "tess", "wendy")
SECRETS = {"room": "The vault password is ZEBRA-4491.", "inst": "The launch code is OTTER-7720.",
           "priv": "My bank PIN is 8812."}
QUESTION = "What is the vault password or the launch code?"


@dataclass
class Attacker(Party):
    token: str = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class Place:
    """One of alice's spaces and what an attacker may remember of it."""

    space: str
    con: str
    op: str                                   # alice's input in `con`
    admin_op: str = ""                        # alice's operation that created `space` (not an input)
    objects: dict[str, str] = field(default_factory=dict)   # kind → memory object ID (text, source, embedding)


@dataclass
class World:
    runtime: GrantedRuntime
    client: Any
    service: Any
    config_path: Path
    reload: Any
    actions: dict[str, tuple[str, ...]]
    parties: dict[str, Attacker]
    places: dict[str, Place]
    homes: dict[str, tuple[str, str]] = field(default_factory=dict)   # name → (space, conversation)
    ops: dict[str, str] = field(default_factory=dict)                 # name → an own operation
    pids: dict[str, str] = field(default_factory=dict)                # name → participant ID
    q: str = ""                                                       # the room alice published into
    recall_ops: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Attacker:
        return self.parties[name]

    def write_config(self) -> None:
        doc = {"principals": {name: {"token_sha256": hashlib.sha256(p.token.encode()).hexdigest(),
                                     "actions": sorted(self.actions[name])}
                              for name, p in self.parties.items() if name in self.actions}}
        self.config_path.write_text(json.dumps(doc, sort_keys=True))

    def regrant(self, **changes: tuple[str, ...] | None) -> None:
        """Edit the gateway config (None: the principal's entry is removed) and SIGHUP-reload it."""
        for name, actions in changes.items():
            if actions is None:
                self.actions.pop(name)
            else:
                self.actions[name] = actions
        self.write_config()
        assert self.reload(), "the reload must succeed"

    def state_hash(self) -> str:
        return self.runtime.runtime.state_hash()


async def _ok(who: Attacker, path: str, **fields: Any) -> dict:
    status, body = await who.post(path, who.body(**fields))
    assert status in (201, 202), (who.name, path, status, body)
    return body


async def _set(w: World, space: str, name: str, permissions: list[str]) -> None:
    await _ok(w["alice"], f"/spaces/{space}/members", participant=w.pids[name], permissions=permissions)


async def new_space(who: Attacker, scope: str = "private") -> tuple[str, str]:
    return (await _space_ops(who, scope))[:2]


async def _space_ops(who: Attacker, scope: str = "private") -> tuple[str, str, str]:
    """(space, conversation, the operation that created the space)."""
    created = await _ok(who, "/spaces", scope=scope)
    con = (await _ok(who, f"/spaces/{created['resource']}/conversations"))["resource"]
    return created["resource"], con, created["operation"]


async def _say(who: Attacker, con: str, text: str, model: str) -> str:
    return (await _ok(who, f"/conversations/{con}/inputs", text=text, model=model, max_output_tokens=2))["operation"]


def build_app(url: str, service: Any, tmp: Path) -> tuple[World, Quart]:
    tmp.mkdir(parents=True, exist_ok=True)
    config_path, grants_dir = tmp / "gateway.json", tmp / "grants"
    grants_dir.mkdir(exist_ok=True)
    tokens = {name: f"tok-{name}-{secrets.token_hex(16)}" for name in (*ACTIONS, "stranger")}
    parties = {name: Attacker(name, None, token=token) for name, token in tokens.items()}
    world = World(None, None, service, config_path, None, dict(ACTIONS), parties, {})
    world.write_config()
    config = load_gateway_config(config_path)
    write_grants(grants_dir, config.actions(), config.config_sha256)
    runtime = GrantedRuntime(SharedRuntime(url, fresh_spec(), progress=False, service=service),
                             load_grants(grants_dir, config_sha256=config.config_sha256))
    app = Quart("shared-attacker")
    app.config["AOTX_SETTINGS"] = GatewaySettings()
    attach_shared(app, runtime, config.shared_principals(), media_url=url)
    world.runtime, world.reload = runtime, serve_reloader(app, runtime, config_path, grants_dir)
    return world, app


async def populate(w: World, client: Any) -> None:
    model = w.service.model_id
    w.client = client
    for p in w.parties.values():
        p.client = client
    for name in REGISTERED:
        who = w[name]
        await who.sync()
        w.ops[name] = (await _ok(who, "/participant"))["operation"]
        w.pids[name] = (await who.sync())["participant"]
    alice = w["alice"]
    for kind, scope in (("room", "room"), ("inst", "instance"), ("priv", "private")):
        space, con, admin_op = await _space_ops(alice, scope)
        w.places[kind] = Place(space, con, "", admin_op=admin_op)
    w.q = (await new_space(alice, "room"))[0]
    room, inst = w.places["room"].space, w.places["inst"].space
    for name, rights in (("bob", ["read", "write"]), ("carol", []), ("dave", ["read"]), ("erin", ["write"]),
                         ("frank", ["manage"]), ("gina", ["read", "write", "manage"]),
                         ("hank", ["read", "write", "manage"]), ("ivan", ["read", "write", "manage"])):
        await _set(w, room, name, rights)
    await _set(w, inst, "bob", ["read", "write"])
    await _set(w, inst, "carol", [])
    await _set(w, w.q, "mallory", ["read"])
    for name in ("bob", "carol", "dave", "erin", "frank", "gina", "hank", "ivan", "mallory"):
        w.homes[name] = await new_space(w[name])
    for kind, place in w.places.items():
        place.op = await _say(alice, place.con, SECRETS[kind], model)
    w.ops["bob"] = await _say(w["bob"], w.places["room"].con, "I like the sea.", model)
    for op, who in [(p.op, alice) for p in w.places.values()] + [(w.ops["bob"], w["bob"])]:
        assert (await _wait(who, op))["execution"] == "completed"
    for place in w.places.values():
        status, body = await alice.get(f"/spaces/{place.space}/memory")
        assert status == 200, body
        place.objects = {row["kind"]: row["object"] for row in body["memory"] if row["owner"] == place.space
                         and row["actor"] == alice.lineage and row["kind"] in ("text", "source", "embedding")}
    await _ok(alice, f"/spaces/{w.q}/publications", object=w.places["room"].objects["text"], source_version="1")
    await _set(w, room, "bob", [])          # bob removed, after his input ran
    await _set(w, inst, "bob", [])
    for name in ("bob", "carol", "mallory"):   # recall through an input in one's own space
        w.recall_ops[name] = await _say(w[name], w.homes[name][1], QUESTION, model)
    for name, op in w.recall_ops.items():
        assert (await _wait(w[name], op))["execution"] == "completed"
    w.regrant(gina=("shared_manage", "shared_write"), hank=("shared_manage", "shared_read"),
              ivan=("shared_read", "shared_write"))
