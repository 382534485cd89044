"""The shared state core: IDs, canonical mutations, fixed-capacity tables, decide/apply, receipts.

Pure: no I/O, no clock, no randomness. The runtime parses a body (`parse_json_body`,
`parse_mutation`), asks `decide(state, Command(actor, mutation))`, appends the events of an
`Accepted` decision to the journal (`encode_event` → transfer payload) and, once the log
acks them, `apply`s them; boot replays the journal through the same `apply` (`decode_event`).
Event bodies: the one codec registry (aotx.journal.registry; this package's kinds in `codec`).
"""

from .apply import apply
from .canonical import SCHEMA, Envelope, canonical_json, parse_counter, parse_envelope, parse_json_body
from .capacities import Capacities
from .decide import GRANT_NEEDED, decide
from .decision import Accepted, Command, Decision, ExecutionContext, ModelCaps, Refusal, Replayed
from .derive import lineage_for, operation_id, operation_sequence
from .errors import (ApplyError, CapacityFull, EventCodecError, IdError, MalformedMutation, MemoryRowError,
                     StateError)
from .codec import decode_event, encode_event, from_body, to_body, transfer_kind
from .events import (ConversationCreated, Event, InputAdmitted, InputCancelled, MemberRightsSet, MemoryPublicationRecorded,
                     OpHeader, ParticipantRegistered,
                     ReceiptsRetired, SpaceCreated)
from .ids import IdKind, ResourceId, format_id, parse_hex16, parse_id
from .memory_rows import (MEMORY_ROW_DTYPE, ROW_SIZE, MemoryKind, MemoryRow, decode_memory_row, encode_memory_row,
                          memory_row_from_json, memory_row_json)
from .mutations import (CancelInput, CreateConversation, CreateSpace, Mutation, PublishMemory, RegisterParticipant,
                        RetireReceipts,
                        SetMemberRights, SubmitInput, canonical_bytes, parse_mutation)
from .queries import (conversation_events, conversation_view, list_conversations, list_members, list_spaces, operation_view,
                      participant_view, readable_operation, result_view, space_view)
from .receipts import find_operation, receipt_json, record_save
from .rights import Actor, Grants, effective_rights, membership_rights, space_reader
from .state import Save, State, empty_state
from .state_hash import state_hash
from .vocab import Admission, Commit, Execution, MutationKind, ResourceKind, Rights, Scope, Terminal, Transport

__all__ = [
    "MemoryPublicationRecorded", "PublishMemory", "CancelInput", "Execution", "ExecutionContext", "InputAdmitted", "InputCancelled", "ModelCaps", "SubmitInput",
    "readable_operation", "result_view", "conversation_events",
    "Accepted", "Actor", "Admission", "ApplyError", "Capacities", "CapacityFull", "Command", "Commit",
    "ConversationCreated", "CreateConversation", "CreateSpace", "Decision", "Envelope", "Event", "EventCodecError",
    "GRANT_NEEDED", "Grants", "IdError", "IdKind", "MEMORY_ROW_DTYPE", "MalformedMutation", "MemberRightsSet",
    "MemoryKind", "MemoryRow", "MemoryRowError", "Mutation", "MutationKind", "OpHeader", "ParticipantRegistered",
    "ROW_SIZE", "ReceiptsRetired", "Refusal", "RegisterParticipant", "Replayed", "ResourceId", "ResourceKind",
    "RetireReceipts", "Rights", "SCHEMA", "Save", "Scope", "SetMemberRights", "SpaceCreated", "State", "StateError",
    "Terminal", "Transport", "apply", "canonical_bytes", "canonical_json", "conversation_view", "decide",
    "decode_event", "decode_memory_row", "effective_rights", "empty_state", "encode_event", "encode_memory_row",
    "find_operation", "format_id", "from_body", "lineage_for", "list_conversations", "list_members", "list_spaces",
    "membership_rights", "memory_row_from_json", "memory_row_json", "operation_id", "operation_sequence",
    "operation_view", "parse_counter", "parse_envelope", "parse_hex16", "parse_id", "parse_json_body",
    "parse_mutation", "participant_view", "receipt_json", "record_save", "space_view", "state_hash", "to_body",
    "space_reader", "transfer_kind",
]
