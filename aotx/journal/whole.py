"""The reassembler's fast path: one journal message that holds only whole transfers of one lineage.

That is what nearly every journal message is (an Emitter tick that starts with a part 0 and ends
with a last part), and boot replay reads thousands of them. `whole_transfers` checks exactly what
the record-by-record path checks — record type and class, body length, each body's crc32c, parts
contiguous and in order with the same kind and count, non-final parts full, the trailing digest,
one valid msgpack value, transfer ids above the last applied one — in one loop, without a Record
per part. A transfer kind in PAYLOAD_DECODERS (filled by the codec registry, `decode_on_read`) has its
payload decoded straight into its event (Transfer.event; its `body` is unpacked only if read), where
that decoder takes it (a kind the registry defers: into its checked Struct, Transfer.wire, the event built
when read); otherwise, and for every other kind, the payload is unpacked into `body`. It changes nothing: on success the caller records the last id; on anything else (a
fault, a transfer left open, a lineage with a transfer open, more than one lineage) it answers
None and the caller feeds the message record by record, which names the fault as always.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, Callable, Optional

from .crc32c import _EXTEND, crc32c
from .record import HEADER, HEADER_SIZE, MAX_BODY, RECORD_CLASS, RECORD_TYPE
from .whole_parts import parts_checker as _checker
from .transfer import _DIGEST_PERSON, _DIGEST_PREFIX, DIGEST_SIZE, WIRE_BUILDERS, Transfer, unpack_body

_unpack_header = HEADER.unpack_from
_u16_at = struct.Struct("<H").unpack_from
_RECORD = HEADER_SIZE + MAX_BODY
_DIGEST_HASH = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_DIGEST_PERSON)   # copied per transfer
_pack_prefix = _DIGEST_PREFIX.pack
_new = object.__new__
# the compiled crc32c called directly on each record's body (bytes: a slice of bytes), else the reference
# transfer kind → payload bytes → event (or a deferred kind's checked Struct) or None
# (aotx.journal.struct_decode.PayloadDecoder)
PAYLOAD_DECODERS: dict[int, Callable[[bytes], Any]] = {}
_crc_extend = _EXTEND if _EXTEND is not None else (lambda crc, body: crc32c(body, crc))


def whole_transfers(data: bytes, open_lineages: Any, last_ids: dict[int, int],
                    raw: bool = False) -> Optional[list[Any]]:
    """The transfers of `data`, in order, where it holds only whole, valid transfers of one lineage
    that has none open (`open_lineages`) and whose ids rise above `last_ids`; else None.
    `raw`: a transfer decoded into a deferred kind's Struct is answered as the tuple `(kind, id, lineage
    hash, payload, Struct, digest)` (a RAW item; `transfer_of` makes the Transfer the plain call answers)."""
    if type(data) is not bytes:
        data = bytes(data)
    size = len(data)
    off = 0
    lh0: Optional[int] = None
    last: Optional[int] = None
    out: list[Transfer] = []
    while off < size:
        if size - off < HEADER_SIZE:
            return None
        rtype, rclass, blen, kind, tid, index, count, crc, lh = _unpack_header(data, off)
        if rtype != RECORD_TYPE or rclass != RECORD_CLASS or index != 0 or count == 0:
            return None
        if lh0 is None:
            if lh in open_lineages:
                return None
            lh0, last = lh, last_ids.get(lh)
        elif lh != lh0:
            return None
        if last is not None and tid <= last:
            return None
        start = off + HEADER_SIZE
        off = start + blen
        if count == 1:   # a single part: 1..160 bytes
            if not 0 < blen <= MAX_BODY or off > size:
                return None
            whole = data[start:off]
            if _crc_extend(0, whole) != crc:
                return None
        else:            # part 0 of several: full (160 bytes), then parts 1..count-1, in order, the final one
            fin = start + (count - 1) * _RECORD - HEADER_SIZE   # 1..160 bytes long, its length read from its header
            if blen != MAX_BODY or size - fin < HEADER_SIZE:
                return None
            blen = _u16_at(data, fin + 2)[0]
            off = fin + HEADER_SIZE + blen
            if not 0 < blen <= MAX_BODY or off > size:
                return None
            # every part's header is the one packed from part 0's fields, its index, its length and its body's
            # crc32c (part 0's own crc32c included): checked in one go (aotx.journal.whole_parts)
            whole = _checker(count)(data, start - HEADER_SIZE, kind, tid, lh, blen, off)
            if whole is None:
                return None
        if len(whole) < DIGEST_SIZE:
            return None
        payload, digest = whole[:-DIGEST_SIZE], whole[-DIGEST_SIZE:]
        h2 = _DIGEST_HASH.copy()
        h2.update(_pack_prefix(kind, tid, lh, len(payload)))
        h2.update(payload)
        if h2.digest() != digest:
            return None
        decoder = PAYLOAD_DECODERS.get(kind)
        event = decoder(payload) if decoder is not None else None
        if event is not None:   # a valid msgpack value; `body` unpacked on first read (Transfer.__getattr__)
            if event.__class__ in WIRE_BUILDERS:   # a deferred kind's checked Struct: the event built when read
                if raw:   # a RAW item: no Transfer made (boot's feed applies a member change from it)
                    out.append((kind, tid, lh, payload, event, digest))
                    last = tid
                    continue
                transfer = _new(Transfer)   # (= transfer_of: written out, the follower's path pays no call)
                transfer.__dict__.update(kind=kind, transfer_id=tid, lineage_hash=lh, payload=payload, wire=event,
                                         digest=digest)
                out.append(transfer)
                last = tid
                continue
            transfer = _new(Transfer)   # a frozen dataclass: its fields (and the verified digest) set directly
            transfer.__dict__.update(kind=kind, transfer_id=tid, lineage_hash=lh, payload=payload, event=event,
                                     digest=digest)
        else:
            try:
                value = unpack_body(payload)
            except Exception:   # msgpack raises several unrelated types: the record path names the fault
                return None
            transfer = _new(Transfer)
            transfer.__dict__.update(kind=kind, transfer_id=tid, lineage_hash=lh, payload=payload, body=value,
                                     event=None, digest=digest)
        out.append(transfer)
        last = tid
    return out if out else None


def transfer_of(item: tuple) -> Transfer:
    """The Transfer of a RAW item of `whole_transfers(…, raw=True)`: the one the plain call answers."""
    kind, tid, lh, payload, wire, digest = item
    transfer = _new(Transfer)
    transfer.__dict__.update(kind=kind, transfer_id=tid, lineage_hash=lh, payload=payload, wire=wire, digest=digest)
    return transfer
