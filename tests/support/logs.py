"""Reading the structured log lines (``jlg_pipeline.log.log_event``) back in tests."""

from typing import Any

import pytest


def events(
    caplog: pytest.LogCaptureFixture, name: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(event, fields) of every structured line captured, optionally of one event only."""
    found = []
    for record in caplog.records:
        event = getattr(record, "jlg_event", None)
        if event is not None and (name is None or event == name):
            found.append((event, dict(getattr(record, "jlg_fields", {}))))
    return found


def fields_of(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [fields for _, fields in events(caplog, name)]
