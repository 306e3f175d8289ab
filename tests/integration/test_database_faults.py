"""Whatever the database does between bulkRegister and its mark, the cycle gets one job and
its result is on record: a real PostgreSQL behind a relay that fails over (resets every
connection and refuses new ones) or goes silent, the online-session stand-in over real HTTP
honouring the cycle's Idempotency-Key."""

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from dagster import DagsterInstance
from sqlalchemy import Engine

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.messages import cycle_id
from jlg_pipeline.domain.models import (
    AttemptOutcome,
    BulkRegisterRequest,
    BulkRegisterResult,
    GenerationResult,
    Trigger,
)
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.services.generation import generate_for_session
from testkit.fault_proxy import FaultProxy, Mode, proxied_database
from testkit.online_session import OnlineSessionService, online_session_service
from tests.support.factories import create_session, force_state, session_row
from tests.support.resources import database

STALE_MS = 10_000
"""The completion write is retried for half of it (5 s)."""


@pytest.fixture
def service() -> Iterator[OnlineSessionService]:
    with online_session_service() as stand_in:
        yield stand_in


@pytest.fixture
def proxied(db_url: str) -> Iterator[tuple[FaultProxy, str]]:
    proxy, url = proxied_database(db_url)
    try:
        yield proxy, url
    finally:
        proxy.close()


@dataclass
class FailsOverAfterAnswering:
    """The online-session service answers, then the database fails over before the mark:
    ``faults`` is the timeline, (mode, seconds) one after the other, then it heals."""

    inner: HttpRegistrar
    proxy: FaultProxy
    faults: list[tuple[Mode, float]]
    started: float = 0.0

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        result = self.inner.bulk_register(request)
        if not self.started:
            self.started = time.monotonic()
            threading.Thread(target=self._run_faults, daemon=True).start()
            time.sleep(0.05)
        return result

    def _run_faults(self) -> None:
        for mode, seconds in self.faults:
            self.proxy.mode = mode
            time.sleep(seconds)
        self.proxy.mode = Mode.PASSING


def _keys(service: OnlineSessionService) -> list[str]:
    return [call["headers"].get("Idempotency-Key") for call in service.received]


def test_a_result_survives_a_failover_between_bulk_register_and_its_mark(
    engine: Engine, proxied: tuple[FaultProxy, str], service: OnlineSessionService
) -> None:
    proxy, url = proxied
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    faulty = create_engine(url, pool_size=2, max_overflow=2)
    repository = ProgramSessionRepository(faulty, TimingWindows(stale_ms=STALE_MS))
    with HttpRegistrar(service.url, "svc-token", timeout_s=5) as http:
        registrar = FailsOverAfterAnswering(http, proxy, [(Mode.REFUSING, 3.0)])
        outcome = generate_for_session(
            sid, repository=repository, registrar=registrar, trigger=Trigger.EVENT
        )
    faulty.dispose()
    assert outcome.result is GenerationResult.COMPLETED
    assert time.monotonic() - registrar.started >= 3.0, "it waited out the failover"
    row = session_row(engine, sid)
    assert row["link_generation_status"] == "COMPLETED"
    assert row["link_generation_job_id"] == outcome.job_id
    assert len(service.received) == 1, "one bulkRegister call for the cycle"
    assert _keys(service) == [cycle_id(sid, row["link_generation_at"])]
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert (attempt.outcome, attempt.job_id) == (AttemptOutcome.COMPLETED, outcome.job_id)


def test_a_retry_of_the_run_resumes_its_own_claim_and_the_cycle_stays_one_job(
    engine: Engine, db_url: str, proxied: tuple[FaultProxy, str], service: OnlineSessionService
) -> None:
    """The failover outlasts the completion write's retries: the step fails retryably, and
    its retry in the same run resumes the claim it holds (before, it skipped it and left the
    session IN_PROGRESS for the watchdog, which called bulkRegister a second time with nothing
    on record). The second call carries the same Idempotency-Key: the service answers the
    same job."""
    proxy, url = proxied
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    instance = DagsterInstance.ephemeral()
    with HttpRegistrar(service.url, "svc-token", timeout_s=5) as http:
        registrar = FailsOverAfterAnswering(http, proxy, [(Mode.REFUSING, 6.0)])
        result = build_generation_job(retry_delay_seconds=0.5).execute_in_process(
            run_config={"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}},
            resources={
                "database": database(url, JLG_TEST_STALE_MS=str(STALE_MS)),
                "registrar": registrar,
            },
            instance=instance,
            raise_on_error=False,
        )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    row = session_row(engine, sid)
    assert row["link_generation_status"] == "COMPLETED"
    key = cycle_id(sid, row["link_generation_at"])
    assert set(_keys(service)) == {key}, "every call named the cycle"
    assert len(service.received) == 2, "the retry called again, under the same key"
    assert service.jobs == {key: row["link_generation_job_id"]}, "one job for the cycle"
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert attempt.attempt == 1, "the retry resumed attempt 1 instead of taking a new one"
    assert (attempt.outcome, attempt.job_id) == (AttemptOutcome.COMPLETED, service.jobs[key])
    assert attempt.run_id == result.run_id
