"""Reading the orchestrator's health from Dagster's rows: the newest completed ticks decide
a sensor's age and its failures in a row; the instance's URL, written for psycopg2, is
driven by psycopg 3."""

import json

import pytest

from jlg_pipeline.adapters.orchestrator_health import _instigators, storage_engine
from jlg_pipeline.domain.errors import ConfigError


def _row(
    name: str, status: str | None, ended: float | None
) -> tuple[str, str, str | None, str | None]:
    body = json.dumps({"origin": {"job_name": name}})
    tick = None if status is None else json.dumps({"end_timestamp": ended})
    return body, "SENSOR", status, tick


def test_failures_in_a_row_count_from_the_newest_tick() -> None:
    rows = [
        _row("a", "FAILURE", 95.0),
        _row("a", "FAILURE", 85.0),
        _row("a", "SUCCESS", 75.0),
        _row("a", "FAILURE", 65.0),
        _row("b", "SKIPPED", 99.0),
        _row("b", "FAILURE", 89.0),
        _row("c", None, None),
    ]
    a, b, c = _instigators(rows, now=100.0)
    assert (a.name, a.kind, a.tick_age_s, a.consecutive_failures) == ("a", "sensor", 5.0, 2)
    assert (b.tick_age_s, b.consecutive_failures) == (1.0, 0)
    assert (c.tick_age_s, c.consecutive_failures) == (None, 0), "never ticked: no age"


def test_the_instance_url_is_driven_by_psycopg_3() -> None:
    engine = storage_engine("postgresql+psycopg2://dagster:pw@db.internal:5432/dagster")
    assert engine.url.drivername == "postgresql+psycopg"
    assert engine.url.host == "db.internal"
    with pytest.raises(ConfigError, match="JLG_DAGSTER_READER_URL"):
        storage_engine("mysql://dagster@db/dagster")
    with pytest.raises(ConfigError, match="not a database URL"):
        storage_engine("::")
