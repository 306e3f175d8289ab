"""Run tags naming the session and the trigger, so runs can be found and limited per session."""

from collections.abc import Mapping

from jlg_pipeline.domain.models import Trigger

SESSION_TAG = "jlg/session"
TRIGGER_TAG = "jlg/trigger"
CORRELATION_TAG = "jlg/correlation_id"
OUTCOME_TAG = "jlg/outcome"
"""Added when a generation run's op ends: completed, skipped, superseded or failed."""


def trigger_of(tags: Mapping[str, str], default: Trigger = Trigger.MANUAL) -> Trigger:
    try:
        return Trigger(tags.get(TRIGGER_TAG, default.value))
    except ValueError:
        return default
