"""The projector (aotx.projection): the one path by which journal messages change the state, at boot and live.

A journal message (one tick) is fed to a recovery-mode Reassembler; every transfer it completes
is absorbed: a mutation or retirement transfer is decoded (`decode_event`) and `apply`d, and its
receipt gets save fields derived only from the log (stream, incarnation, the completing message's
stream sequence, the boot that wrote it, the per-lineage commit digest chain), so a replay gives
byte-identical receipts. A control transfer `runtime.boot` records which runtime boot wrote the
transfers that follow it on that lineage. An ADMISSION transfer is an input's mutation event
(applied the same way); LEASE, OUTPUT and COMPLETION transfers are an input's execution
(aotx.state.execution), a completion also renewing its receipt's save fields. A MEMORY transfer
is an input's retained memory (aotx.memory MemoryRetained), applied to the memory store; a
publication (a MUTATION transfer holding `memory.publication`) changes both the state (its
receipt) and the memory store (the published copies). A STORED transfer is an event of the
standard surfaces' stored state (aotx.stored: responses, conversations, idempotency keys), applied
to `stored`; it must be on its identity's lineage subject. Anything else fails closed (ReplayError).
A message on a subject that is not a journal record's (`<prefix>.<lineage>.tick`) was written by no
runtime (an operator's filler, say): it is counted and skipped, at boot and live alike.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..journal import Reassembler, Transfer, TransferKind, lineage_hash
from ..journal.whole import transfer_of
from ..memory import MemoryPublished, MemoryRetained, MemoryStore, decode_memory_event, memory_event_from_body
from ..journal.registry import REGISTRY
from ..state import Capacities, MemoryPublicationRecorded, Save, State, StateError, empty_state, from_body
from ..state.apply import apply_into, owned_copy, record_save_into
from ..state.codec import STATE
from ..state.member_wire import MEMBER_WIRE, apply_member_wire
from ..state.execution import InputCompleted, apply_execution_into, execution_from_body, input_slot
from ..stored import StoredState, apply_stored_into, identity_lineage, stored_from_body

BOOT_CONTROL = "runtime.boot"
_CHAIN_PERSON = b"aotx-commit"
TICK_KIND = "tick"
_TICK_SUFFIX = "." + TICK_KIND


class ReplayError(RuntimeError):
    """The journal cannot be applied: recovery stops here and names where."""


def boot_control_body(boot: str) -> dict[str, Any]:
    return {"kind": BOOT_CONTROL, "v": 1, "boot": boot}


_CHAIN_HASH = hashlib.blake2b(digest_size=32, person=_CHAIN_PERSON)   # copied per link: no parameter parsing


def chain(previous: bytes, transfer_digest: bytes) -> bytes:
    h = _CHAIN_HASH.copy()
    h.update(previous + transfer_digest)
    return h.digest()


@dataclass
class Projector:
    """State plus the per-lineage bookkeeping needed to write and to verify the journal."""

    source: str
    incarnation: str
    capacities: Capacities | None = None
    state: State = field(init=False)
    memory: MemoryStore = field(default_factory=MemoryStore)
    stored: StoredState = field(default_factory=StoredState)
    reassembler: Reassembler = field(default_factory=lambda: Reassembler(recovery=True))
    last_transfer: dict[int, int] = field(default_factory=dict)      # lineage hash -> last transfer id
    last_subject_seq: dict[str, int] = field(default_factory=dict)   # subject -> last stream seq
    applied_seq: int = 0   # the highest stream seq applied (= max of last_subject_seq), kept as it goes
    chains: dict[int, bytes] = field(default_factory=dict)           # lineage hash -> commit digest
    boots: dict[int, str] = field(default_factory=dict)              # lineage hash -> boot that writes it
    messages: int = 0
    transfers: int = 0

    def __post_init__(self) -> None:
        # owned by the projector and advanced in place by apply_into (tests hold it equal to apply);
        # its tables stay read-only between applies, so readers cannot change it
        self.state = owned_copy(empty_state(self.capacities))
        self._applying = False   # inside applying(): the tables are unlocked for a run of feeds
        # a Save's fields in their order, those fixed for this projector set (`_saved` fills in the others)
        self._save_fields = {"source": self.source, "incarnation": self.incarnation, "generation": 0, "boot": "",
                             "commit_digest": "", "pending_bytes": 0, "disk_error": None}
        self._writable(False)

    def _writable(self, on: bool) -> None:
        s = self.state
        for arr in (s.participants, s.spaces, s.conversations, s.members, s.receipts):
            arr.setflags(on)   # (`write` by position, no keyword to parse: 1.1k instructions a call against
            #  2.2k for `setflags(write=on)` and 3.3k for `arr.flags.writeable = on`, callgrind)

    def feed(self, subject: str, seq: int, data: bytes, own: tuple[Transfer, ...] = ()) -> list[Transfer]:
        """Absorb one journal message (stream sequence `seq`); returns the transfers it completed.
        `own`: the writer's own acknowledged tick's whole transfers (aotx.journal Tick.transfers,
        what reassembling `data` yields): taken as they are where the reassembler agrees, so the
        writer's own bytes are not framed and verified again; the same absorb follows. Own transfers that
        write no table (stored records, boot control) are absorbed with the tables left read-only.
        Inside `applying()` the tables are already unlocked: fed as they are."""
        if self._applying or (own and all(t.kind in _OFF_TABLES for t in own)):
            return self._feed(subject, seq, data, own)
        self._writable(True)
        try:
            return self._feed(subject, seq, data, own)
        finally:
            self._writable(False)

    @contextmanager
    def applying(self) -> Iterator["Projector"]:
        """A run of `feed` calls with the tables unlocked once and the cyclic garbage collector paused
        (a replay allocates a few objects per message and makes no cycles; its young-generation passes
        cost ~15–20 % of the feed), both restored at the end: for a caller that feeds several messages
        without awaiting in between (the follower's queued messages, `feed_many`). Reentrant."""
        if self._applying:
            yield self
            return
        collecting = gc.isenabled()
        gc.disable()
        self._writable(True)
        self._applying = True
        try:
            yield self
        finally:
            self._applying = False
            self._writable(False)
            if collecting:
                gc.enable()

    def feed_many(self, messages: Iterable[tuple[str, int, bytes]]) -> int:
        """Absorb messages (subject, seq, data) in order, as `feed` does one by one; returns how many.
        Boot feeds the journal in batches through this, inside one `applying()` (the call does not await)."""
        n = 0
        with self.applying():
            for subject, seq, data in messages:
                self._feed(subject, seq, data, (), True)
                n += 1
        return n

    def _feed(self, subject: str, seq: int, data: bytes, own: tuple[Transfer, ...] = (),
              raw: bool = False) -> list[Transfer]:
        """`raw` (boot's feed_many, whose caller reads no transfer): a member change comes from the reassembler
        as its RAW item and is applied from it (`_absorb_member`), its Transfer made only where it does not apply
        there; the list answered then holds those items."""
        if not subject.endswith(_TICK_SUFFIX):   # not a journal record's subject (`<prefix>.<lineage>.tick`):
            self.last_subject_seq[subject] = seq   # nothing a runtime wrote (an operator's filler): skipped
            if seq > self.applied_seq:
                self.applied_seq = seq
            self.messages += 1
            return []
        if own and self.reassembler.accept_whole(own[0].lineage_hash, own):
            done = list(own)
        else:
            try:
                done = self.reassembler.feed_message(data, seq, raw)
            except ValueError as exc:  # RecordError / TransferError: fail closed
                raise ReplayError(f"journal message {seq} on {subject}: {exc}") from exc
        self.last_subject_seq[subject] = seq
        if seq > self.applied_seq:
            self.applied_seq = seq
        self.messages += 1
        if raw:
            for transfer in done:
                if transfer.__class__ is not tuple:
                    self._absorb(transfer, subject, seq)
                elif not self._absorb_member(transfer, subject, seq):   # any other kind, or refused: the
                    self._absorb(transfer_of(transfer), subject, seq)   # Transfer's path (it names a fault)
        else:
            for transfer in done:
                self._absorb(transfer, subject, seq)
        return done

    def finish(self) -> None:
        """End of a replay: a transfer left partial fails closed."""
        try:
            self.reassembler.finish()
        except ValueError as exc:
            raise ReplayError(f"journal ends inside a transfer: {exc}") from exc

    def open_parts(self, lh: int) -> int:
        """Parts seen of the partial transfer of a lineage (0 = none open)."""
        return next((seen for h, _, seen, _ in self.reassembler.open_transfers if h == lh), 0)

    def _check_lineage(self, where: str, subject: str, lh: int, lineage: bytes) -> None:
        if lineage_hash(lineage) != lh:
            raise ReplayError(f"{where}: lineage {lineage.hex()} is not the record's")
        if subject.split(".")[-2] != lineage.hex():
            raise ReplayError(f"{where}: lineage {lineage.hex()} on subject {subject}")
        if lh not in self.boots:
            raise ReplayError(f"{where}: no runtime.boot control record precedes it on this lineage")

    def _apply_event(self, t: Transfer, kind: int, lh: int, subject: str, seq: int) -> tuple[int, str]:
        """Check and apply a state event transfer: (the receipt slot it wrote, the boot that wrote it)."""
        try:
            event = t.event   # decoded by the reassembler (or the writer's own), else from its body
            if event is None:
                event = from_body(t.body)  # = decode_event(t.payload): the reassembler unpacked it
            if _TRANSFER_OF[event.__class__] != kind:   # (transfer_kind(event), one lookup)
                raise ReplayError(f"{_where(t, seq)}: a {event.KIND} event in a kind {t.kind} transfer")
            lineage = event.op.lineage
            # the subject's lineage and its hash (cached per subject): where the event's lineage is the
            # subject's and the subject's hash the record's, both checks below hold; else each is made
            if _subject_lineage_hash(subject) != (lineage, lh):
                if lineage_hash(lineage) != lh:
                    raise ReplayError(f"{_where(t, seq)}: event lineage {lineage.hex()} is not the record's")
                if _subject_lineage(subject) != lineage:
                    raise ReplayError(f"{_where(t, seq)}: event of lineage {lineage.hex()} on subject {subject}")
            boot = self.boots.get(lh)
            if boot is None:
                raise ReplayError(f"{_where(t, seq)}: no runtime.boot control record precedes it on this lineage")
            if isinstance(event, MemoryPublicationRecorded):
                self.memory.apply(_publication(event, _where(t, seq)))  # checks everything before it writes
            slot = apply_into(self.state, event)  # raises before any write: a refused event changes nothing
        except StateError as exc:
            raise ReplayError(f"{_where(t, seq)}: {exc}") from exc
        return slot, boot

    def _absorb_member(self, item: tuple, subject: str, seq: int) -> bool:
        """Absorb a RAW item (aotx.journal.whole) that is a member change which applies, as `_absorb` would its
        Transfer (its member path, below: the same checks, the same writes); False, nothing changed, otherwise."""
        kind, tid, lh, _, wire, transfer_digest = item
        if kind != _MUTATION or wire.__class__ is not MEMBER_WIRE:
            return False
        applied = self._member_applied(wire, lh, subject)
        if applied is None:
            return False
        h = _CHAIN_HASH.copy()   # = chain(previous, transfer_digest)
        h.update(self.chains.get(lh, b"") + transfer_digest)
        digest = h.digest()
        self._saved(applied[0], seq, applied[1], digest)
        self.chains[lh] = digest
        self.last_transfer[lh] = tid
        self.transfers += 1
        return True

    def _member_applied(self, wire: Any, lh: bytes, subject: str) -> tuple[int, str] | None:
        """A member-rights change left as its checked Struct (`wire`), applied where the record's lineage, its
        subject and a boot record agree: (its receipt's slot, the boot); None, nothing written, otherwise (its
        event's path then names the fault)."""
        boot = self.boots.get(lh)
        named = _SUBJECTS.get(subject)   # (the subject's lineage and hash: a plain dict, not lru_cache's call)
        if named is None:
            if len(_SUBJECTS) >= 65536:   # (bounded as the lru_cache is)
                _SUBJECTS.clear()
            named = _SUBJECTS[subject] = _subject_lineage_hash(subject)
        if boot is None or named is None or named[0] != wire.op_lineage or named[1] != lh:
            return None
        slot = apply_member_wire(self.state, wire)   # None: it does not apply, nothing written
        return None if slot is None else (slot, boot)

    def _saved(self, slot: int, seq: int, boot: str, digest: bytes) -> None:
        """The receipt in `slot` saved by the record at `seq` (record_save_into, without Save's __init__)."""
        save = _new(Save)   # = Save(...) without its __init__ (a frozen dataclass): the same fields, in order
        fields = save.__dict__
        fields.update(self._save_fields)   # (source, incarnation, placeholders, pending_bytes 0, disk_error None:
        fields["generation"] = seq         #  one C merge, then three stores, ~1/3 less than a keyword update)
        fields["boot"] = boot
        fields["commit_digest"] = digest.hex()
        self.state.saves[slot] = save

    def _absorb(self, t: Transfer, subject: str, seq: int) -> None:
        lh = t.lineage_hash
        h = _CHAIN_HASH.copy()   # = chain(previous, t.digest)
        h.update(self.chains.get(lh, b"") + t.digest)
        digest = h.digest()
        kind = t.kind
        if kind in _EVENTS:   # the hot path, first: `where` is formatted only for an error
            wire = t.__dict__.get("wire")   # a member-rights change the reassembler left as its checked Struct
            applied = None
            if wire is not None and wire.__class__ is MEMBER_WIRE and kind == _MUTATION:
                applied = self._member_applied(wire, lh, subject)
            # any other event, or one refused above: the event's path names the fault
            slot, boot = self._apply_event(t, kind, lh, subject, seq) if applied is None else applied
            self._saved(slot, seq, boot, digest)
        elif kind == _CONTROL:
            body = t.body
            if not (isinstance(body, dict) and body.get("kind") == BOOT_CONTROL and body.get("v") == 1
                    and isinstance(body.get("boot"), str) and set(body) == {"kind", "v", "boot"}):
                raise ReplayError(f"{_where(t, seq)}: unknown control record {body!r:.80}")
            self.boots[lh] = body["boot"]
        elif kind in _EXECUTION:
            where = _where(t, seq)
            try:
                ev = execution_from_body(t.kind, t.body)
                if lineage_hash(ev.lineage) != lh:
                    raise ReplayError(f"{where}: execution lineage {ev.lineage.hex()} is not the record's")
                if subject.split(".")[-2] != ev.lineage.hex():
                    raise ReplayError(f"{where}: execution of lineage {ev.lineage.hex()} on subject {subject}")
                if lh not in self.boots:
                    raise ReplayError(f"{where}: no runtime.boot control record precedes it on this lineage")
                apply_execution_into(self.state, ev)
            except StateError as exc:
                raise ReplayError(f"{where}: {exc}") from exc
            if isinstance(ev, InputCompleted):  # the receipt's save now names where its terminal result is
                slot = input_slot(self.state, ev.lineage, ev.sequence, where)
                record_save_into(self.state, slot, Save(
                    source=self.source, incarnation=self.incarnation, generation=seq, boot=self.boots[lh],
                    commit_digest=digest.hex(), pending_bytes=0, disk_error=None))
        elif kind == _MEMORY:
            where = _where(t, seq)
            try:
                mem = memory_event_from_body(t.body)
                if not isinstance(mem, MemoryRetained):
                    raise ReplayError(f"{where}: a {mem.KIND} event in a memory transfer")
                self._check_lineage(where, subject, lh, mem.op.lineage)
                if self.state.receipt_slot(mem.op.lineage, mem.op.sequence) is None:
                    raise ReplayError(f"{where}: memory of sequence {mem.op.sequence}, which has no receipt")
                self.memory.apply(mem)
            except StateError as exc:
                raise ReplayError(f"{where}: {exc}") from exc
        elif kind == _STORED:
            where = _where(t, seq)
            try:
                stored = t.event if t.event is not None else stored_from_body(t.body)   # own tick: as decided
                self._check_lineage(where, subject, lh, identity_lineage(stored.identity))
                apply_stored_into(self.stored, stored)   # checks everything before it writes
            except StateError as exc:
                raise ReplayError(f"{where}: {exc}") from exc
        else:
            raise ReplayError(f"{_where(t, seq)}: transfer kind {t.kind} is not one this runtime applies")
        self.chains[lh] = digest
        self.last_transfer[lh] = t.transfer_id
        self.transfers += 1


@functools.lru_cache(maxsize=65536)
def _subject_lineage(subject: str) -> bytes | None:
    """The lineage a journal record's subject (`<prefix>.<lineage hex>.tick`) names: the bytes whose
    `.hex()` is its second-last token exactly (None where no bytes' is), so that comparing it with a
    lineage is `subject.split(".")[-2] == lineage.hex()`."""
    token = subject.split(".")[-2] if subject.count(".") >= 1 else None
    if token is None:
        return None
    try:
        raw = bytes.fromhex(token)
    except ValueError:
        return None
    return raw if raw.hex() == token else None


@functools.lru_cache(maxsize=65536)
def _subject_lineage_hash(subject: str) -> tuple[bytes, int] | None:
    """(lineage, its hash) of the lineage a journal record's subject names (`_subject_lineage`), or None."""
    lineage = _subject_lineage(subject)
    return None if lineage is None else (lineage, lineage_hash(lineage))


_new = object.__new__
if [f.name for f in dataclasses.fields(Save)] != ["source", "incarnation", "generation", "boot", "commit_digest",
                                                  "pending_bytes", "disk_error"]:   # (Projector._save_fields' order)
    raise TypeError("Save's fields changed: Projector._save_fields and _saved build them")
# journal subject → (lineage, its hash) or None, as `_subject_lineage_hash` answers (the hot path's lookup)
_SUBJECTS: dict[str, tuple[bytes, int] | None] = {}


def _save(source: str, incarnation: str, generation: int, boot: str, commit_digest: str) -> Save:
    """A replayed transfer's Save (a frozen dataclass), built without its `__init__`: the same fields,
    the same object as Save(...)."""
    save = _new(Save)
    save.__dict__.update(source=source, incarnation=incarnation, generation=generation, boot=boot,
                         commit_digest=commit_digest, pending_bytes=0, disk_error=None)
    return save


def _where(t: Transfer, seq: int) -> str:
    """Where a transfer is, for an error message."""
    return f"transfer {t.transfer_id} (kind {t.kind}, lineage {t.lineage_hash:#018x}) in journal message {seq}"


_MUTATION = int(TransferKind.MUTATION)
_CONTROL, _MEMORY, _STORED = int(TransferKind.CONTROL), int(TransferKind.MEMORY), int(TransferKind.STORED)
_EXECUTION = frozenset(int(k) for k in (TransferKind.LEASE, TransferKind.OUTPUT, TransferKind.COMPLETION))
_EVENTS = frozenset(int(k) for k in (TransferKind.MUTATION, TransferKind.RETIREMENT, TransferKind.ADMISSION))
_OFF_TABLES = frozenset((_CONTROL, _STORED))   # kinds whose absorb writes no table of `state`
_TRANSFER_OF = {k.cls: int(k.transfer) for k in REGISTRY.kinds(STATE)}   # every class from_body can give


def _publication(event: MemoryPublicationRecorded, where: str) -> MemoryPublished:
    """The memory part of a publication, checked against the state event that carries it."""
    mem = decode_memory_event(event.memory)
    op = event.op
    if not isinstance(mem, MemoryPublished):
        raise ReplayError(f"{where}: a publication holds a {mem.KIND} memory event")
    if (mem.op.lineage, mem.op.sequence, mem.op.operation) != (op.lineage, op.sequence, op.operation) or \
            mem.actor != op.lineage or mem.destination != event.space_lineage + event.space:
        raise ReplayError(f"{where}: the publication's memory event names another operation or destination")
    return mem
