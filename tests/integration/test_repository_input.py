"""Bad input to the repository gets a typed error and writes nothing."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.errors import DatabaseRefused, InvalidInput, is_retryable
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state, session_row

LATER = datetime.now(UTC) + timedelta(days=1)


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("set_link_generation", (0, LATER, 1)),
        ("set_link_generation", ("7", LATER, 1)),
        ("set_link_generation", ("SID", datetime(2030, 1, 1), 1)),  # naive on purpose
        ("set_link_generation", ("SID", "2030-01-01T00:00:00Z", 1)),
        ("set_link_generation", ("SID", LATER, 0)),
        ("set_link_generation", ("SID", LATER, "7")),
        ("claim", (True,)),
        ("get_state", (None,)),
        ("find_due_for_fallback_generation", (0,)),
        ("find_due_for_fallback_generation", (2.5,)),
    ],
)
def test_bad_input_raises_invalid_input_and_writes_nothing(
    engine: Engine, repository: ProgramSessionRepository, method: str, args: tuple[Any, ...]
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    before = session_row(engine, sid)
    call_args = tuple(sid if a == "SID" else a for a in args)
    with pytest.raises(InvalidInput):
        getattr(repository, method)(*call_args)
    assert session_row(engine, sid) == before


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        ("SELECT 1 / 0", {}),
        ("SELECT CAST(:v AS text)", {"v": "mentor\x00"}),
        ("INSERT INTO hdb_program_session (id, program_id) VALUES (:v, 1), (:v, 1)", {"v": 9}),
    ],
    ids=["division", "nul", "unique"],
)
def test_a_value_the_database_refuses_is_not_worth_retrying(
    engine: Engine, statement: str, params: dict[str, Any]
) -> None:
    """A NUL or a broken constraint is refused however often it is tried: it must not go
    round the retries as if the database were down, nor carry the statement into the text."""
    with (
        pytest.raises(DatabaseRefused) as refused,
        translate_errors("testing"),
        engine.begin() as c,
    ):
        c.execute(text(statement), params)
    assert not is_retryable(refused.value)
    assert refused.value.__cause__ is None
    assert "SELECT" not in str(refused.value)
    assert "INSERT" not in str(refused.value)
