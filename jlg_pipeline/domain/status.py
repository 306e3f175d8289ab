"""The link-generation status machine (TRD §State Machines), as data.

The database enforces it (every write is one conditional UPDATE); this table is what those
statements implement and what the tests hold them to.
"""

from enum import StrEnum


class LinkGenerationStatus(StrEnum):
    NOT_SCHEDULED = "NOT_SCHEDULED"
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class Transition(StrEnum):
    """What moves a session from one status to another."""

    ARM = "arm"  # admin sets a future time
    CLEAR = "clear"  # admin clears with null
    CLAIM = "claim"  # event, cron or backfill wins the atomic claim
    STALE_RECLAIM = "stale_reclaim"  # a claim re-won after STALE_MS (crashed run)
    COMPLETE = "complete"  # bulkRegister returned, for the attempt holding the claim
    FAIL = "fail"  # generation raised, for the attempt holding the claim


S = LinkGenerationStatus

# A fresh IN_PROGRESS is left out of ARM and CLEAR on purpose: re-arming a running
# generation would let a second one start (inv-01), so the API answers 409 instead.
# A stale IN_PROGRESS may be re-armed or cleared; the crashed run is fenced out.
# COMPLETED may be re-armed: that starts a new cycle.
ALLOWED_TRANSITIONS: frozenset[tuple[S, S, Transition]] = frozenset(
    {(before, S.SCHEDULED, Transition.ARM) for before in S}
    | {(before, S.NOT_SCHEDULED, Transition.CLEAR) for before in S}
    | {
        (S.SCHEDULED, S.IN_PROGRESS, Transition.CLAIM),
        (S.FAILED, S.IN_PROGRESS, Transition.CLAIM),
        (S.IN_PROGRESS, S.IN_PROGRESS, Transition.STALE_RECLAIM),
        (S.IN_PROGRESS, S.COMPLETED, Transition.COMPLETE),
        (S.IN_PROGRESS, S.FAILED, Transition.FAIL),
    }
)

CLAIMABLE_STATUSES: tuple[S, ...] = (S.SCHEDULED, S.FAILED)
"""Statuses a claim may take without waiting for the stale window."""
