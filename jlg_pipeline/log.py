"""Structured log lines: an event name plus key=value fields, readable as text and kept on
the record (``record.jlg_event``, ``record.jlg_fields``) for JSON formatters and tests."""

import logging
import re
from typing import Any

_UNPRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""C0, DEL, C1, Unicode's line and paragraph separators and its bidi controls: a field holding
one could end the line, forge another event, drive the reader's terminal or reorder what it
shows (a U+202E makes the rest of a line read backwards)."""
_QUOTED = re.compile(r'[ "=]')
"""A value holding one of these is quoted: it could otherwise read as the end of its field and
the start of another (``x message_id=7``)."""


def escaped(text: str) -> str:
    """``text`` with every character of _UNPRINTABLE written as its escape (``\\n``,
    ``\\x1b``, ``\\u2028``) and backslashes doubled: one line is one event, whatever a field
    from outside holds, and the escape reads back unambiguously."""
    return _UNPRINTABLE.sub(_escape, text.replace("\\", "\\\\"))


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def field_value(value: object) -> str:
    """One field's value as a line shows it: escaped, and quoted (``"…"``, its quotes as
    ``\\"``) when it holds a space, a quote or an ``=``, or nothing at all, so no value reads
    as another field."""
    text = escaped(str(value))
    if text and not _QUOTED.search(text):
        return text
    return '"' + text.replace('"', '\\"') + '"'


def log_event(
    logger: logging.Logger,
    level: int,
    event: str,
    *,
    exc_info: BaseException | None = None,
    **fields: Any,
) -> None:
    text = " ".join(
        f"{key}={field_value(value)}" for key, value in fields.items() if value is not None
    )
    logger.log(
        level,
        "%s %s",
        event,
        text,
        extra={"jlg_event": event, "jlg_fields": fields},
        exc_info=exc_info,
    )


def describe(exc: BaseException) -> str:
    """An error as kept on a row and in a log line: its type, then its message."""
    return f"{type(exc).__name__}: {exc}"


class EscapedArgs(logging.Filter):
    """A library's log line whose arguments come from outside (uvicorn's access line: the
    client's address, from ``X-Forwarded-For`` behind a proxy, and the request's path) has
    each escaped (:func:`escaped`), so one line stays one event."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(escaped(a) if isinstance(a, str) else a for a in record.args)
        return True


ESCAPED_LOGGERS = ("uvicorn.access",)


def configure_logging(level: int = logging.INFO) -> None:
    """Send this project's lines to stderr when the host process has not set up logging
    (uvicorn configures only its own loggers). Libraries stay at WARNING; the access log's
    fields from outside are escaped."""
    for name in ESCAPED_LOGGERS:
        library = logging.getLogger(name)
        if not any(isinstance(f, EscapedArgs) for f in library.filters):
            library.addFilter(EscapedArgs())
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=logging.WARNING,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
        )
    for name in ("jlg_pipeline", "web"):
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(level)
