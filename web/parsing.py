"""What a request says, parsed once where it enters: path parameters, the listing's query
and the JSON bodies (through the models in ``web/schemas.py``), into the domain's types;
anything else is InvalidInput, named in words a client can act on."""

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from jlg_pipeline.domain import rfc3339, validation
from jlg_pipeline.domain.constants import BIGINT_MAX
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.programme_actions import ProgrammeAction, ProgrammeRequest, SessionFilter
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from web.schemas import ProgrammeActionDto, ProgrammeWhereDto, SetLinkGenerationDto

MAX_BODY_BYTES = 4096

LISTING_PARAMETERS = {"programId", "status", "from", "to", "limit", "afterId"}
MAX_LIST_LIMIT = 500
DEFAULT_LIST_LIMIT = 50


def parse_listing_query(
    query: list[tuple[str, str]],
) -> tuple[SessionFilter, int, int]:
    """The filter a programme action takes (``programId``; ``status``, one or more of the
    five, comma-separated or repeated; ``from``/``to`` RFC 3339 bounds), ``limit`` (1-500,
    default 50), ``afterId`` (≥ 0, default 0), each other one at most once; anything else is
    InvalidInput."""
    seen: dict[str, str] = {}
    for name, value in query:
        if name not in LISTING_PARAMETERS:
            names = ", ".join(sorted(LISTING_PARAMETERS))
            raise InvalidInput(f"unknown query parameter {name[:40]!r}; use {names}")
        if name in seen and name != "status":
            raise InvalidInput(f"query parameter {name} given more than once")
        # Statuses comma-separated, or the parameter repeated (as a generated client sends a
        # list): the same filter.
        seen[name] = f"{seen[name]},{value}" if name in seen else value
    where = SessionFilter(
        program_id=_optional_whole(seen, "programId", 1, BIGINT_MAX),
        statuses=_statuses(seen["status"].split(",")) if "status" in seen else (),
        from_at=_moment(seen.get("from"), "from"),
        to_at=_moment(seen.get("to"), "to"),
    )
    limit = _whole(seen, "limit", DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT)
    after_id = _whole(seen, "afterId", 0, 0, BIGINT_MAX)
    return where, limit, after_id


def _statuses(values: list[str]) -> tuple[LinkGenerationStatus, ...]:
    try:
        return tuple(LinkGenerationStatus(v) for v in values)
    except ValueError:
        names = ", ".join(s.value for s in LinkGenerationStatus)
        raise InvalidInput(f"status must be one or more of {names}") from None


def _moment(text: str | None, name: str) -> datetime | None:
    return None if text is None else parse_rfc3339(text, name)


def _whole(seen: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    found = _optional_whole(seen, name, low, high)
    return default if found is None else found


def _optional_whole(seen: dict[str, str], name: str, low: int, high: int) -> int | None:
    raw = seen.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and low <= int(raw) <= high):
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
    return int(raw)


def parse_session_id(raw: str) -> SessionId:
    return validation.session_id(_digits(raw, "program session id"), "program session id")


def parse_program_id(raw: str) -> int:
    return validation.program_id(_digits(raw, "programId"))


def _digits(raw: str, name: str) -> int:
    """A path segment as a whole number (its range is the domain's rule)."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        raise InvalidInput(f"{name} must be a positive integer, got {raw[:40]!r}")
    return int(raw)


def parse_operation_id(raw: str) -> UUID:
    try:
        return UUID(raw)
    except ValueError:
        raise InvalidInput(f"operationId must be a UUID, got {raw[:40]!r}") from None


def _json(raw: bytes) -> Any:
    """The body as JSON (UTF-8, RFC 8259); a key given twice is refused rather than the last
    one silently winning, so what was checked is what was meant."""
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_once_each)
    except InvalidInput:
        raise
    except (ValueError, RecursionError):
        raise InvalidInput("body is not valid JSON") from None


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise InvalidInput("body gives a key more than once")
    return found


def parse_set_body(raw: bytes) -> datetime | None:
    """The body's time as an aware UTC datetime, or None to clear. Whether it lies in the
    future is the database clock's to say (the one that decides "due"), not this host's.

    Raises InvalidInput with a message that names what is wrong.
    """
    try:
        dto = SetLinkGenerationDto.model_validate(_json(raw))
    except ValidationError as exc:
        raise InvalidInput(_describe(exc)) from None
    if dto.linkGenerationAt is None:
        return None
    return parse_rfc3339(dto.linkGenerationAt)


def parse_idempotency_key(raw: str | None) -> str | None:
    """The ``Idempotency-Key`` header, when sent: a programme action's own key."""
    return validation.text(raw, "Idempotency-Key", validation.MAX_KEY_CHARS)


def parse_programme_body(raw: bytes, program_id: int) -> ProgrammeRequest:
    """A programme action's body as the domain's checked request (InvalidInput names what
    is wrong): exactly one of ``linkGenerationAt`` (null clears) and ``shiftBy``."""
    try:
        dto = ProgrammeActionDto.model_validate(_json(raw))
    except ValidationError as exc:
        raise InvalidInput(_describe(exc, "")) from None
    given = dto.model_fields_set & {"linkGenerationAt", "shiftBy"}
    if len(given) != 1:
        raise InvalidInput("give exactly one action: linkGenerationAt or shiftBy")
    where = dto.where or ProgrammeWhereDto()
    return ProgrammeRequest(
        where=SessionFilter(
            program_id=program_id,
            statuses=tuple(where.status or ()),
            from_at=_moment(where.from_, "from"),
            to_at=_moment(where.to, "to"),
        ),
        action=_action(dto, given),
        expected_count=dto.expectedCount,
        dry_run=dto.dryRun,
    )


def _action(dto: ProgrammeActionDto, given: set[str]) -> ProgrammeAction:
    """The action the body names, by the field given, not by its value: a ``"shiftBy": null``
    is a mistake to refuse, never a clear."""
    if "shiftBy" not in given:
        at = _moment(dto.linkGenerationAt, "linkGenerationAt")
        if at is not None:
            validation.within_horizon(at, datetime.now(UTC))
        return ProgrammeAction.setting(at)
    if dto.shiftBy is None:
        raise InvalidInput("shiftBy must be a whole number of seconds, not null")
    return ProgrammeAction.shifting(dto.shiftBy)


def parse_rfc3339(text: str, name: str = "linkGenerationAt") -> datetime:
    """An RFC 3339 date-time with its offset (``Z`` or ``±HH:MM``), as an aware UTC datetime."""
    if rfc3339.RFC3339.fullmatch(text) is None:
        raise InvalidInput(
            f"{name} must be an RFC 3339 date-time with an offset, "
            "e.g. 2026-12-03T09:00:00Z or 2026-12-03T10:00:00+01:00"
        )
    when = rfc3339.date_time(text)
    if when is None:
        raise InvalidInput(f"{name} is not a valid date-time in range")
    return when


def _describe(exc: ValidationError, fallback: str = ": must be a string date-time or null") -> str:
    """The first error, named by its field; never the input itself. ``fallback`` for a
    wrong type ('' says pydantic's own words, which name the type, not the value)."""
    first = exc.errors()[0]
    # A field name is the client's own text: bounded and escaped before it is repeated.
    where = validation.shown(".".join(str(p) for p in first["loc"])) or "body"
    kind = first["type"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"unknown field {where}"
    if kind == "model_type":
        return "body must be a JSON object"
    return f"{where}{fallback or ': ' + first['msg']}"
