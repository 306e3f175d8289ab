"""The embedded registrar against real PostgreSQL: eligibility, batches, no duplicates."""

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from jlg_pipeline.adapters.registrars.embedded import EmbeddedRegistrar
from jlg_pipeline.adapters.tables import local_bulk_job, local_join_link
from jlg_pipeline.domain.errors import InvalidInput, RegistrarRejected
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.factories import add_registrations, create_session, force_state


def _links(engine: Engine, session_id: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(local_join_link.c.program_session_id == session_id)
            ).scalar_one()
        )


def test_registers_every_eligible_registration_in_batches(engine: Engine) -> None:
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 23, role="attendee")
    add_registrations(engine, 10, 4, role="mentor", first_user_id=1000)
    add_registrations(engine, 10, 3, status="WITHDRAWN", first_user_id=2000)
    add_registrations(engine, 11, 5)  # another program
    registrar = EmbeddedRegistrar(engine)

    result = registrar.bulk_register(
        BulkRegisterRequest(sid, role="attendee", batch_size=5, actor_user_id=3)
    )

    assert result.total == 23
    assert _links(engine, sid) == 23
    with engine.connect() as conn:
        job = conn.execute(select(local_bulk_job).where(local_bulk_job.c.id == result.job_id)).one()
        urls = conn.execute(select(local_join_link.c.join_url)).scalars().all()
    assert (job.total, job.created, job.batch_size, job.actor_user_id) == (23, 23, 5, 3)
    assert job.finished_at is not None
    assert len(set(urls)) == len(urls), "every join link is distinct"


def test_no_role_means_every_role(engine: Engine) -> None:
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 6, role="attendee")
    add_registrations(engine, 10, 2, role="mentor", first_user_id=100)
    assert EmbeddedRegistrar(engine).bulk_register(BulkRegisterRequest(sid)).total == 8


def test_repeats_create_no_duplicate_join_links(engine: Engine) -> None:
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 40)
    registrar = EmbeddedRegistrar(engine)
    first = registrar.bulk_register(BulkRegisterRequest(sid, batch_size=7))
    add_registrations(engine, 10, 2, first_user_id=500)  # late registrants join the rerun
    second = registrar.bulk_register(BulkRegisterRequest(sid, batch_size=7))
    with ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda _: registrar.bulk_register(BulkRegisterRequest(sid, batch_size=3)), range(4)
            )
        )

    assert (first.total, second.total) == (40, 42)
    assert _links(engine, sid) == 42
    with engine.connect() as conn:
        created = conn.execute(
            select(local_bulk_job.c.created).where(local_bulk_job.c.id == second.job_id)
        ).scalar_one()
    assert created == 2


def test_missing_or_deleted_session_is_rejected(engine: Engine) -> None:
    sid = create_session(engine)
    registrar = EmbeddedRegistrar(engine)
    with pytest.raises(RegistrarRejected):
        registrar.bulk_register(BulkRegisterRequest.parse(sid + 50))
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED, deleted=True)
    with pytest.raises(RegistrarRejected):
        registrar.bulk_register(BulkRegisterRequest(sid))


@pytest.mark.parametrize(
    "fields",
    [{"session_id": 0}, {"session_id": 1, "batch_size": 0}, {"session_id": 1, "role": ""}],
)
def test_bad_request_is_refused_before_any_write(engine: Engine, fields: dict[str, Any]) -> None:
    create_session(engine)
    with pytest.raises(InvalidInput):  # a bad request cannot even be parsed
        EmbeddedRegistrar(engine).bulk_register(BulkRegisterRequest.parse(**fields))
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(local_bulk_job)).scalar_one() == 0


def test_a_second_cycle_reports_what_it_created_beside_the_total(engine: Engine) -> None:
    """Re-arming a COMPLETED session generates again: ``total`` counts every eligible
    registrant covered, ``created`` only the links that did not exist yet."""
    sid = create_session(engine, program_id=12)
    add_registrations(engine, 12, 25)
    registrar = EmbeddedRegistrar(engine)
    first = registrar.bulk_register(BulkRegisterRequest(sid))
    assert (first.total, first.created) == (25, 25)
    add_registrations(engine, 12, 2, first_user_id=500)
    again = registrar.bulk_register(BulkRegisterRequest(sid))
    assert (again.total, again.created) == (27, 2)


def _jobs(engine: Engine, session_id: int) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(local_bulk_job).where(local_bulk_job.c.program_session_id == session_id)
            ).all()
        )


def test_a_second_call_with_the_cycles_key_answers_the_first_job(engine: Engine) -> None:
    """Two calls for one cycle (a completion write lost, then the run's retry) are one job."""
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 12)
    registrar = EmbeddedRegistrar(engine)
    key = f"join-link-{sid}@2030-01-01T09:00:00Z"
    first = registrar.bulk_register(BulkRegisterRequest(sid, idempotency_key=key))
    again = registrar.bulk_register(BulkRegisterRequest(sid, idempotency_key=key))
    assert (again.job_id, again.total) == (first.job_id, 12)
    assert [job.id for job in _jobs(engine, sid)] == [first.job_id]
    other_cycle = registrar.bulk_register(
        BulkRegisterRequest(sid, idempotency_key=f"join-link-{sid}@2030-01-02T09:00:00Z")
    )
    assert other_cycle.job_id != first.job_id, "a new cycle is a new job"
    assert _links(engine, sid) == 12


def test_concurrent_calls_with_one_key_start_one_job(engine: Engine) -> None:
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 30)
    registrar = EmbeddedRegistrar(engine)
    key = f"join-link-{sid}@2030-01-01T09:00:00Z"
    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(
                lambda _: registrar.bulk_register(BulkRegisterRequest(sid, idempotency_key=key)),
                range(6),
            )
        )
    assert len({r.job_id for r in results}) == 1
    assert len(_jobs(engine, sid)) == 1
    assert _links(engine, sid) == 30


def test_a_job_that_died_half_way_is_finished_by_the_next_call_with_its_key(
    engine: Engine,
) -> None:
    sid = create_session(engine, program_id=10)
    add_registrations(engine, 10, 9)
    key = f"join-link-{sid}@2030-01-01T09:00:00Z"
    with engine.begin() as conn:
        conn.execute(
            local_bulk_job.insert().values(
                id="died", program_session_id=sid, batch_size=5, idempotency_key=key
            )
        )
    result = EmbeddedRegistrar(engine).bulk_register(BulkRegisterRequest(sid, idempotency_key=key))
    assert (result.job_id, result.total) == ("died", 9)
    [job] = _jobs(engine, sid)
    assert job.finished_at is not None
    assert _links(engine, sid) == 9
