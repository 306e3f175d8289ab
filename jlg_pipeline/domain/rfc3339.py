"""RFC 3339's date-time, nothing looser, read the one way every edge reads it: an admin's time
(``web/parsing.py``) and a service's ``Retry-After`` (``adapters/registrars/http.py``)."""

import re
from datetime import UTC, datetime

# fromisoformat alone also takes a space separator, basic format, week dates and
# second-fraction offsets.
RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def date_time(text: str) -> datetime | None:
    """``text`` as an aware UTC datetime when it is an RFC 3339 date-time with its offset
    (``Z`` or ``±HH:MM``) that Python can hold; None otherwise (never raises)."""
    match = RFC3339.fullmatch(text)
    if match is None:
        return None
    date, clock, fraction, offset = match.groups()
    microseconds = f".{(fraction or '')[:6]:0<6}"
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{date}T{clock}{microseconds}{offset}").astimezone(UTC)
    except (ValueError, OverflowError):
        return None
