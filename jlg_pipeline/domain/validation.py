"""Checks on values entering public functions, so bad input fails before any write. The one
set of field rules: the API, a queue message, run config and the bulkRegister request all
check their fields here."""

import re
from datetime import datetime
from typing import NewType

from jlg_pipeline.domain.constants import (
    BIGINT_MAX,
    INT_MAX,
    LINK_GENERATION_HORIZON,
    MAX_REGISTRAR_BATCH_SIZE,
    READABLE_FROM,
    READABLE_UNTIL,
)
from jlg_pipeline.domain.errors import InvalidInput

MAX_ROLE_CHARS = 64
MAX_MESSAGE_TEXT_CHARS = 200
"""A queue message's free-text fields (correlationId, timestamp) become run tags."""
MAX_KEY_CHARS = 200
"""An idempotency key (``join-link-<id>@<cycle>``)."""
CONTROL_CHARACTERS = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""C0 and C1 (NUL included), Unicode's line and paragraph separators and its bidi controls:
refused wherever a string enters. PostgreSQL refuses NUL in text, and none of them belongs in
a tag, a log line, an operator's name or a request to the online-session service (a U+202E
reorders the rest of the line a person reads)."""


SHOWN_CHARS = 40
"""How much of a client's own text (a field name, a parameter) an error repeats."""


def shown(text: str, max_chars: int = SHOWN_CHARS) -> str:
    """``text`` as an error may repeat it: at most ``max_chars``, every character that is not
    printable or is markup written as ``\\uXXXX``."""
    escaped = "".join(
        c if c.isprintable() and c not in "<>&\"'" else f"\\u{ord(c):04x}" for c in text[:max_chars]
    )
    return escaped + ("…" if len(text) > max_chars else "")


def int_between(value: object, low: int, high: int) -> int | None:
    """The value when it is a real int (bools are not) within [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


SessionId = NewType("SessionId", int)
"""A program session's id as :func:`session_id` parsed it where it entered (the HTTP path, a
queue message, run config, a row an older release wrote), or as the database returned it: the
stores and services below take this type and check nothing again
(``tests/unit/test_layering.py``)."""


def session_id(value: object, name: str = "programSessionId") -> SessionId:
    checked = int_between(value, 1, BIGINT_MAX)
    if checked is None:
        raise InvalidInput(f"{name} must be a positive 64-bit integer, got {value!r}")
    return SessionId(checked)


def program_id(value: object, name: str = "programId") -> int:
    checked = int_between(value, 1, BIGINT_MAX)
    if checked is None:
        raise InvalidInput(f"{name} must be a positive 64-bit integer, got {value!r}")
    return checked


def actor_user_id(value: object) -> int | None:
    if value is None:
        return None
    checked = int_between(value, 1, INT_MAX)
    if checked is None:
        raise InvalidInput(f"actorUserId must be a positive 32-bit integer, got {value!r}")
    return checked


def batch_size(value: object) -> int | None:
    if value is None:
        return None
    checked = int_between(value, 1, MAX_REGISTRAR_BATCH_SIZE)
    if checked is None:
        raise InvalidInput(
            f"batchSize must be an integer from 1 to {MAX_REGISTRAR_BATCH_SIZE}, got {value!r}"
        )
    return checked


def positive_limit(value: object, name: str = "limit") -> int:
    checked = int_between(value, 1, INT_MAX)
    if checked is None:
        raise InvalidInput(f"{name} must be a positive integer, got {value!r}")
    return checked


def text(value: object, name: str, max_chars: int) -> str | None:
    """A string of at most ``max_chars`` with something besides whitespace in it (Unicode's
    whitespace counts) and no control character; None stays None."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > max_chars
        or CONTROL_CHARACTERS.search(value)
    ):
        raise InvalidInput(
            f"{name} must be a non-blank string of at most {max_chars} characters "
            "with no control, separator or bidi characters"
        )
    return value


def role(value: object) -> str | None:
    return text(value, "role", MAX_ROLE_CHARS)


def aware_datetime(value: object, name: str = "linkGenerationAt") -> datetime:
    if not isinstance(value, datetime):
        raise InvalidInput(f"{name} must be a datetime, got {type(value).__name__}")
    if value.utcoffset() is None:
        raise InvalidInput(f"{name} must carry a UTC offset")
    return value


HORIZON_REASON = (
    f"must be at most {LINK_GENERATION_HORIZON.days} days ahead (the horizon, about five years)"
)


def within_horizon(value: datetime, now: datetime, name: str = "linkGenerationAt") -> datetime:
    """``value`` when it lies no further than LINK_GENERATION_HORIZON after ``now``."""
    if value - now > LINK_GENERATION_HORIZON:
        raise InvalidInput(f"{name} {HORIZON_REASON}")
    return value


def out_of_range(value: datetime | None) -> bool:
    """Whether a stored time was read at a bound of what Python can load (``ReadableTime``):
    it cannot be shown as it is, and is reported as out of range instead."""
    return value is not None and not READABLE_FROM < value < READABLE_UNTIL
