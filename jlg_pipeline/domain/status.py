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


S = LinkGenerationStatus

CLAIMABLE_STATUSES: tuple[S, ...] = (S.SCHEDULED, S.FAILED)
"""Statuses a claim may take without waiting for the stale window."""

ARMED_STATUSES: tuple[S, ...] = (S.SCHEDULED, S.IN_PROGRESS, S.FAILED)
"""The statuses of sessions armed with a time, the ones /metrics counts ("hold" is the service's
word: docs/architecture.md's glossary). A large host table is mostly NOT_SCHEDULED or
COMPLETED, and neither is worth a gauge (docs/design.md "Scale")."""
