"""The link-generation statuses (TRD §State Machines). The database enforces the machine:
every write is one conditional UPDATE (``adapters/repository.py``); the table of allowed
transitions those statements implement lives with the tests that hold them to it."""

from enum import StrEnum


class LinkGenerationStatus(StrEnum):
    NOT_SCHEDULED = "NOT_SCHEDULED"
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    """Read only: the row holds none of the five (the host's own write, with its CHECK
    dropped). No claim takes it, every read shows it as this, and a PATCH of its time repairs
    it; a listing's ``status=UNKNOWN`` finds such rows."""


S = LinkGenerationStatus

WRITTEN_STATUSES: tuple[S, ...] = tuple(s for s in S if s is not S.UNKNOWN)
"""The statuses a row may hold (the CHECK constraint's list); UNKNOWN is how a read shows any
other value."""

CLAIMABLE_STATUSES: tuple[S, ...] = (S.SCHEDULED, S.FAILED)
"""Statuses a claim may take without waiting for the stale window."""

ARMED_STATUSES: tuple[S, ...] = (S.SCHEDULED, S.IN_PROGRESS, S.FAILED)
"""The statuses of sessions armed with a time, the ones /metrics counts ("hold" is the service's
word: docs/architecture.md's glossary). A large host table is mostly NOT_SCHEDULED or
COMPLETED, and neither is worth a gauge (docs/design.md "Scale")."""
