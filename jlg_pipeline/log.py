"""Structured log lines: an event name plus key=value fields, readable as text and kept on
the record (``record.jlg_event``, ``record.jlg_fields``) for JSON formatters and tests."""

import logging
from typing import Any


def log_event(
    logger: logging.Logger,
    level: int,
    event: str,
    *,
    exc_info: BaseException | None = None,
    **fields: Any,
) -> None:
    text = " ".join(f"{key}={value}" for key, value in fields.items() if value is not None)
    logger.log(
        level,
        "%s %s",
        event,
        text,
        extra={"jlg_event": event, "jlg_fields": fields},
        exc_info=exc_info,
    )
