"""Execution events: what the runtime journals about an admitted input (plain data).

On the input author's lineage (aotx/state/codec.py registers each with its transfer kind):

* `input.lease` (LEASE) — `{"kind", "v": 1, "actor", "lease": <lease bytes>}` (aotx.journal.lease,
  revision 3 by default): each row assigns one queued input (actor = lineage, sequence) to an
  execution slot → `running`.
* `input.output` (OUTPUT) — `{"kind", "v": 1, "actor", "sequence", "offset", "data"}`: the next
  bytes of the result; `offset` must be the bytes already saved.
* `input.completion` (COMPLETION) — `{"kind", "v": 1, "actor", "sequence", "execution",
  "input_tokens", "output_tokens", "finish", "error"}`: the terminal result (a terminal status).

The attribute `lineage` is keyed `actor` on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Union

from ..journal.errors import LeaseError
from ..journal.lease import Lease, decode_lease, encode_lease
from ..journal.wire import B16, U64, Packed, Require, Wire
from .vocab import Execution

Actor = Annotated[B16, Wire("actor")]
LeaseBytes = Annotated[Lease, Packed(encode_lease, decode_lease, (LeaseError,))]
TerminalExecution = Annotated[Execution, Require(lambda status: status.terminal, "not terminal")]


@dataclass(frozen=True)
class LeaseApplied:
    lineage: Actor
    lease: LeaseBytes
    KIND = "input.lease"


@dataclass(frozen=True)
class OutputAppended:
    lineage: Actor
    sequence: U64
    offset: U64
    data: bytes
    KIND = "input.output"


@dataclass(frozen=True)
class InputCompleted:
    lineage: Actor
    sequence: U64
    execution: TerminalExecution
    input_tokens: U64 = 0
    output_tokens: U64 = 0
    finish: str = ""
    error: str = ""
    KIND = "input.completion"


ExecutionEvent = Union[LeaseApplied, OutputAppended, InputCompleted]
