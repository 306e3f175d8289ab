"""The sweep's candidate query: exactly overdue-past-grace, not COMPLETED, not deleted,
claimable (stale IN_PROGRESS only); SCHEDULED and stale IN_PROGRESS oldest first, then FAILED
fewest attempts first; limited; each tier served by its partial index."""

from datetime import timedelta

from sqlalchemy import Engine, text

from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import program_session
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import create_session, force_state

S = LinkGenerationStatus
OVERDUE = timedelta(minutes=-31)


def test_candidates_are_exactly_the_overdue_claimable_ones(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    def make(
        status: S, at: timedelta | None, updated: timedelta = timedelta(0), deleted: bool = False
    ) -> int:
        sid = create_session(engine, online=False)
        force_state(engine, sid, status, at_offset=at, updated_offset=updated, deleted=deleted)
        return sid

    scheduled_old = make(S.SCHEDULED, timedelta(hours=-5))
    failed = make(S.FAILED, timedelta(hours=-3))
    stale = make(S.IN_PROGRESS, timedelta(hours=-2), updated=timedelta(minutes=-40))
    scheduled = make(S.SCHEDULED, timedelta(minutes=-45))
    make(S.IN_PROGRESS, timedelta(hours=-2), updated=timedelta(minutes=-10))  # fresh claim
    make(S.COMPLETED, timedelta(hours=-6))
    make(S.NOT_SCHEDULED, None)
    make(S.SCHEDULED, timedelta(minutes=-29))  # inside the grace window: the event's turn
    make(S.SCHEDULED, timedelta(hours=2))  # future
    make(S.SCHEDULED, timedelta(hours=-4), deleted=True)
    make(S.FAILED, timedelta(hours=-4), deleted=True)

    found = Candidates(engine).find_due_for_fallback_generation(50)
    assert [c.id for c in found] == [scheduled_old, stale, scheduled, failed]
    assert [c.status for c in found] == [S.SCHEDULED, S.IN_PROGRESS, S.SCHEDULED, S.FAILED]
    assert Candidates(engine).count_due_for_fallback_generation() == 4
    assert [c.id for c in Candidates(engine).find_due_for_fallback_generation(2)] == [
        scheduled_old,
        stale,
    ]


def test_failed_sessions_come_last_fewest_attempts_first(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    def failed(attempt: int, at: timedelta) -> int:
        sid = create_session(engine, online=False)
        force_state(engine, sid, S.FAILED, at_offset=at, attempt=attempt)
        return sid

    many_old = failed(9, timedelta(days=-30))
    few_new = failed(1, timedelta(hours=-1))
    few_old = failed(1, timedelta(hours=-9))
    some = failed(3, timedelta(days=-2))
    scheduled = create_session(engine, online=False)
    force_state(engine, scheduled, S.SCHEDULED, at_offset=timedelta(minutes=-31))

    found = [c.id for c in Candidates(engine).find_due_for_fallback_generation(50)]
    assert found == [scheduled, few_old, few_new, some, many_old]


def test_candidate_query_uses_the_partial_index(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO hdb_program_session
                    (program_id, link_generation_at, link_generation_status, updated_at)
                SELECT g % 100,
                       now() - make_interval(mins => g % 5000),
                       CASE WHEN g % 100 = 0 THEN 'SCHEDULED'
                            WHEN g % 100 = 1 THEN 'FAILED'
                            WHEN g % 100 = 2 THEN 'IN_PROGRESS'
                            WHEN g % 100 < 10 THEN 'NOT_SCHEDULED'
                            ELSE 'COMPLETED' END,
                       now() - make_interval(mins => g % 90)
                FROM generate_series(1, 50000) AS g
                """
            )
        )
        conn.execute(text(f"ANALYZE {program_session.name}"))
        statement = Candidates(engine).fallback_candidates_statement(50)
        compiled = statement.compile(engine, compile_kwargs={"render_postcompile": True})
        plan = "\n".join(
            row[0] for row in conn.exec_driver_sql(f"EXPLAIN {compiled}", compiled.params)
        )
    assert "ix_psession_link_gen_fresh" in plan, plan
    assert "ix_psession_link_gen_failed" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert len(Candidates(engine).find_due_for_fallback_generation(50)) == 50
