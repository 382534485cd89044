"""The words of the shared rules as a client sees them: mutation kinds, rights and grants, the statuses of a
new operation, and the execution states of an input."""
from __future__ import annotations

READ, WRITE, MANAGE = "read", "write", "manage"
ALL_RIGHTS = frozenset({READ, WRITE, MANAGE})
IMPLICIT_INSTANCE = frozenset({READ, WRITE})
ALL_GRANTS = frozenset({"shared_read", "shared_write", "shared_manage"})
GRANT_RIGHT = {"shared_read": READ, "shared_write": WRITE, "shared_manage": MANAGE}

REGISTER, RETIRE, SPACE, MEMBER, CONVERSATION = "register", "retire", "space", "member", "conversation"
INPUT, CANCEL, PUBLISH = "input", "cancel", "publish"
NEW_STATUSES = frozenset({201, 202})   # a new operation: 202 for an input (admitted, executing), else 201

# the grant each mutation kind needs before anything else is looked at (decide: lineage, grant, ...)
GRANT_NEEDED = {REGISTER: "shared_write", RETIRE: "shared_write", SPACE: "shared_write",
                MEMBER: "shared_manage", CONVERSATION: "shared_write", INPUT: "shared_write",
                CANCEL: "shared_write", PUBLISH: "shared_manage"}

QUEUED, RUNNING = "queued", "running"
TERMINAL = frozenset({"completed", "cancelled", "interrupted", "failed", "deadline_exceeded"})
EXECUTIONS = frozenset({QUEUED, RUNNING}) | TERMINAL
