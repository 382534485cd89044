"""aotx.stored: the stored state of the standard surfaces (issue 11) — stored Responses, OpenAI
Conversations and Idempotency-Key records — as events of the one journal and one projector.

One noun per file: `ids` (identities, ids, keys), `vocab` (statuses, reasons), `events` (what is
journalled: STORED transfers, kind 9), `codec` (their registration), `state` (the projection),
`apply` (state × event → state), `commands` (what a surface asks), `decide` (command → events or a
refusal), `queries` (reads), `limits` (bounds and retention), `outcomes` (answers), `notices` (what
live readers hear), `recovery` (what a boot closes), `export` (snapshot form and digest), `port`
(the Protocol the API uses; implemented by aotx.runtime.stored_writes).
"""

from types import ModuleType as _ModuleType

from .apply import apply_stored, apply_stored_into
from .codec import STORED, decode_stored, encode_stored, stored_body, stored_from_body
from .commands import (AddConversationItems, AppendKeyAnswer, AppendResponseEvents, BeginKey, CancelResponse,
                       CreateConversation, CreateResponse, DeleteConversation, DeleteConversationItem,
                       DeleteResponse, Expire, FinishKey, FinishResponse, StoredCommand, UpdateConversation)
from .decide import Accepted, decide
from .errors import StoredApplyError, StoredCodecError, StoredError
from .events import (ConversationCreated, ConversationDeleted, ConversationItemDeleted, ConversationItemsAdded,
                     ConversationMetadataSet, KeyAnswered, KeyFinished, KeyStarted, ResponseCancelRequested,
                     ResponseCreated, ResponseDeleted, ResponseEventsAppended, ResponseFinished, StoredEvent,
                     StoredExpired)
from .export import export_stored, import_stored, stored_digest
from .ids import (SURFACES, identity_lineage, identity_of_key, identity_of_principal, is_conversation_id,
                  is_item_id, is_response_id, new_id)
from .limits import StoredLimits
from .notices import StoredNotice, notices
from .outcomes import KeyLookup, Saved, StoredOutcome, StoredRefusal
from .port import StoredJournal, StoredReads
from .queries import ConversationView, Page, ResponseEvents, ResponseView
from .recovery import interruptions
from .state import StoredState
from .vocab import KeyEnd, KeyState, Reason, ResponseStatus

__all__ = sorted(name for name, value in dict(globals()).items()
                 if not name.startswith("_") and not isinstance(value, _ModuleType))
