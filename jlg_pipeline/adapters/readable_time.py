"""``ReadableTime``: the column type of every time a host row or ours may hold out of
Python's range (``adapters/tables.py`` uses it for the host's times and ours); ``KnownStatus``:
the session's status, which the host's row may hold outside the five."""

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, String, case, literal, type_coerce
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from jlg_pipeline.domain.constants import READABLE_FROM, READABLE_UNTIL
from jlg_pipeline.domain.status import WRITTEN_STATUSES, LinkGenerationStatus


class ReadableTime(TypeDecorator[datetime]):
    """A ``timestamptz`` every read can load: PostgreSQL stores times to year 294276 (and
    ``infinity``), Python's datetime stops at 9999, and one such row (the host's own write, an
    older release's shift) made every read of it raise, a listing and a sensor's tick with it.
    Each SELECT of such a column reads it within [READABLE_FROM, READABLE_UNTIL], in SQL; the
    domain shows a bound as out of range (``domain.constants``)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def column_expression(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        # Not least/greatest: they skip a NULL. Typed as a plain timestamptz so an outer
        # SELECT does not wrap it again.
        return type_coerce(
            case((column < _FROM, _FROM), (column > _UNTIL, _UNTIL), else_=column),
            DateTime(timezone=True),
        )


_FROM = literal(READABLE_FROM, DateTime(timezone=True))
_UNTIL = literal(READABLE_UNTIL, DateTime(timezone=True))


class KnownStatus(TypeDecorator[str]):
    """The session's status as every read can parse it: a value outside the five (a host that
    dropped the CHECK constraint) is read as ``UNKNOWN``, in SQL, so one such row makes no read
    of it or of any other row fail."""

    impl = String(20)
    cache_ok = True

    def column_expression(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        return type_coerce(
            case(
                (column.in_([s.value for s in WRITTEN_STATUSES]), column),
                else_=literal(LinkGenerationStatus.UNKNOWN.value),
            ),
            String(20),
        )
