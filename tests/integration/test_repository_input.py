"""Bad input to the repository gets a typed error and writes nothing."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.errors import InvalidInput
from jlg_pipeline.domain.status import LinkGenerationStatus
from tests.support.factories import create_session, force_state, session_row

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
