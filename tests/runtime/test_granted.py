"""GrantedRuntime: the deployment grant file decides an author's grants at recall, and a replaced
file (SIGHUP) takes effect for the next read of every principal."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from aotx.runtime import GrantedRuntime, SharedRuntime
from aotx.runtime_file import GrantFile
from aotx.state import Actor, Grants, lineage_for


def _file(principals: dict[str, set[str]]) -> GrantFile:
    return GrantFile(Path("grants.json"), dt.datetime.now(dt.timezone.utc), "0" * 64,
                     {n: frozenset(a) for n, a in principals.items()}, "1" * 64)


def test_author_grants_follow_the_current_grant_file():
    runtime = SharedRuntime("nats://127.0.0.1:1", progress=False)   # never started: no connection
    assert runtime.author_grants(lineage_for("alice")) == Grants.all()   # bare: membership alone decides
    granted = GrantedRuntime(runtime, _file({"alice": {"shared_read", "shared_write"}, "bob": {"shared_read"}}))
    assert runtime.author_grants(lineage_for("alice")) == Grants(shared_read=True, shared_write=True)
    assert runtime.author_grants(lineage_for("bob")) == Grants(shared_read=True)
    assert runtime.author_grants(lineage_for("mallory")) == Grants()    # a principal the file does not name
    granted.replace_grants(_file({"alice": {"shared_write"}}))
    assert runtime.author_grants(lineage_for("alice")) == Grants(shared_write=True)
    assert runtime.author_grants(lineage_for("bob")) == Grants()
    assert granted.actor(Actor("alice", Grants.all())).grants == Grants(shared_write=True)
