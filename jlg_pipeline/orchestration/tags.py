"""Run tags naming the session and the trigger, so runs can be found and limited per session."""

from collections.abc import Mapping
from datetime import UTC, datetime

from jlg_pipeline.domain.models import Trigger

SESSION_TAG = "jlg/session"
TRIGGER_TAG = "jlg/trigger"
CORRELATION_TAG = "jlg/correlation_id"
OUTCOME_TAG = "jlg/outcome"
"""Added when a generation run's op ends: completed, skipped, superseded or failed."""
CYCLE_TAG = "jlg/cycle"
"""Added when a generation run's claim generated: one value per session and cycle."""


def cycle_id(session_id: int, link_generation_at: datetime) -> str:
    """``join-link-<id>@<time>``: the correlation id of one cycle (the message's own
    correlation id, ``join-link-<id>``, is the same for every cycle of a session)."""
    return f"join-link-{session_id}@{link_generation_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def trigger_of(tags: Mapping[str, str], default: Trigger = Trigger.MANUAL) -> Trigger:
    try:
        return Trigger(tags.get(TRIGGER_TAG, default.value))
    except ValueError:
        return default
