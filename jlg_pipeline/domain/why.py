"""What the answer to "why is it waiting?" is made of (``services/why.py`` explains it;
``adapters/why_facts.py`` reads it with the claim's own definitions)."""

from dataclasses import dataclass
from datetime import datetime

from jlg_pipeline.domain.attempts import AttemptRecord
from jlg_pipeline.domain.service_view import Turn, ViewState
from jlg_pipeline.domain.session_state import LinkGenerationState

ATTEMPTS_SHOWN = 5
"""The last attempts an answer lists."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What the answer is made of, each read with the claim's own definition."""

    now: datetime
    """The database clock, the one the claim decides by."""
    session: LinkGenerationState
    readable: bool
    """Its time is one every read can load (``session_statements.readable``, the claim's own
    guard): when not, no claim takes it, and its time shows as null."""
    waits_now: bool
    """The queue's predicate (``session_statements.waiting``): a worker's claim may take it now."""
    claim_at: datetime | None
    """``session_statements.claim_time``: when the queue may take it; None: not without a write."""
    lease_ends_at: datetime | None
    """IN_PROGRESS: when its claim goes stale (``session_statements.lease_ends``)."""
    attempts: tuple[AttemptRecord, ...]
    """Its last attempts, newest first."""
    service: Turn
    """What a caller of the online-session service would be given now (domain ``take_turn``)."""
    service_state: ViewState
    """The service's shared view that turn was decided on."""
    programmes_ahead: int
    """Programmes whose turn has come that the pick serves before this session's."""
    live_workers: int
    """Runs draining the queue that beat within the watchdog's liveness window."""
    scheduler_enabled: bool
    sweep_at: datetime | None
    """The first sweep that takes it (its start once the sweep's grace after its time has
    passed, UTC); None while the sweep is off."""
    watchdog_grace_s: float
    watchdog_every_s: float
