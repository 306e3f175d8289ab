"""A programme action when its database stops answering or fails over part-way, on real
PostgreSQL behind a fault proxy: the request fails within the engine's bound with nothing half
done (each chunk is one transaction), and repeating it with its key once the database is back
finishes it, every session moved exactly once."""

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from jlg_pipeline.adapters.database import Bounds, create_engine
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.adapters.tables import link_generation_change
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.errors import DatabaseUnavailable
from jlg_pipeline.domain.programme_actions import (
    OPERATION_CHUNK,
    ProgrammeAction,
    ProgrammeRequest,
    SessionFilter,
)
from jlg_pipeline.services.programme_actions import ProgrammeActions
from testkit.factories import create_sessions
from testkit.fault_proxy import FaultProxy, Mode

DAY = 86_400
HOLD_S = 3.0


class FailsAfterFirstChunk(IntentWrites):
    """The real intent writes; once its first chunk has committed, the database fails as ``mode``
    says (silent: a frozen host; refusing: a failover)."""

    def __init__(self, engine: Engine, proxy: FaultProxy, mode: Mode) -> None:
        super().__init__(engine)
        self._proxy = proxy
        self._mode = mode

    def act_on_chunk(self, *args: Any, **kwargs: Any) -> Any:
        done = super().act_on_chunk(*args, **kwargs)
        self._proxy.mode = self._mode
        return done


def _times(engine: Engine, program_id: int) -> dict[int, datetime]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(ps.c.id, ps.c.link_generation_at).where(ps.c.program_id == program_id)
        ).all()
    return {r.id: r.link_generation_at for r in rows}


@pytest.mark.parametrize("mode", [Mode.SILENT, Mode.REFUSING])
def test_an_action_cut_off_by_the_database_is_finished_by_its_repeat(
    engine: Engine, proxied_db: tuple[FaultProxy, str], mode: Mode
) -> None:
    proxy, url = proxied_db
    create_sessions(engine, 2 * OPERATION_CHUNK + 200, program_id=5)
    before = _times(engine, 5)
    request = ProgrammeRequest(
        where=SessionFilter(program_id=5),
        action=ProgrammeAction.shifting(DAY),
        expected_count=len(before),
        dry_run=False,
    )
    faulty = create_engine(url, pool_size=2, max_overflow=0, bounds=Bounds(hold_s=HOLD_S))
    try:
        cut = ProgrammeActions(
            FailsAfterFirstChunk(faulty, proxy, mode),
            ProgrammeOperations(faulty),
            record_schedule_changes=False,
        )
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable):
            cut.act(request, 7, "move-5")
        assert time.monotonic() - started < HOLD_S + 5, "the engine's bound cut the wait"

        after = _times(engine, 5)
        moved = [sid for sid in before if after[sid] == before[sid] + timedelta(days=1)]
        assert len(moved) == OPERATION_CHUNK, "the first chunk whole, nothing of the next"
        assert all(after[s] == before[s] for s in before if s not in moved)

        proxy.mode = Mode.PASSING
        again = ProgrammeActions(
            IntentWrites(faulty),
            ProgrammeOperations(faulty),
            record_schedule_changes=False,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                result = again.act(request, 7, "move-5")
                break
            except DatabaseUnavailable:
                assert time.monotonic() < deadline, "the database came back"
                time.sleep(0.2)
    finally:
        faulty.dispose()

    assert (result.matched, result.changed, result.skipped) == (len(before), len(before), [])
    after = _times(engine, 5)
    assert all(after[s] == before[s] + timedelta(days=1) for s in before), "each moved once"
    with engine.connect() as conn:
        recorded = conn.execute(select(func.count()).select_from(link_generation_change))
        assert recorded.scalar_one() == len(before)
