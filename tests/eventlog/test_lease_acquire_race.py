"""eventlog.LeaseBucket.acquire when the lease's last entry expires while it is being acquired.

nats-py's `KeyValue.create` first tries `update(last=0)`; refused (the key has an entry), it reads the
key to tell a live entry from a delete tombstone. An entry that the bucket's max age removes between
the two (a lease expiring just as another runtime takes it over), or a replica that does not hold it,
makes that read raise KeyNotFoundError out of `create`: seen as a 500 "the runtime could not answer:
KeyNotFoundError" in tests/cluster/test_boot_leases.py on the 2-core sandbox (issue 15). The key is
free then: acquire tries again. The stand-in KV below answers `create` the way nats-py does in that
race (a real bucket cannot be made to expire an entry between two requests of one call)."""

from __future__ import annotations

import nats.js.errors

from eventlog import LeaseBucket


class ExpiringKv:
    """`create` raises KeyNotFoundError (the race) `races` times, then creates the key (revision 7), or
    refuses it (a live holder: KeyWrongLastSequenceError) when `held`."""

    def __init__(self, races: int, held: bool = False) -> None:
        self.races, self.held, self.calls = races, held, 0

    async def create(self, key: str, value: bytes) -> int:
        self.calls += 1
        if self.races:
            self.races -= 1
            raise nats.js.errors.KeyNotFoundError()
        if self.held:
            raise nats.js.errors.KeyWrongLastSequenceError()
        return 7


async def test_a_lease_that_expires_while_it_is_acquired_is_acquired():
    kv = ExpiringKv(races=1)
    assert await LeaseBucket(kv, "OWN", 10).acquire("ab", b"v") == 7 and kv.calls == 2


async def test_a_lease_taken_meanwhile_is_not_acquired_and_the_race_never_escapes():
    assert await LeaseBucket(ExpiringKv(races=1, held=True), "OWN", 10).acquire("ab", b"v") is None
    kv = ExpiringKv(races=10**6)
    assert await LeaseBucket(kv, "OWN", 10).acquire("ab", b"v") is None and kv.calls == 3
