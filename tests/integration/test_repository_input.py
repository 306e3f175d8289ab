"""A value the database refuses gets a typed error that is not worth retrying. (Bad input
never reaches the repository: each edge parses it, tests/unit/test_layering.py.)"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.domain.errors import DatabaseRefused, is_retryable

LATER = datetime.now(UTC) + timedelta(days=1)


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
