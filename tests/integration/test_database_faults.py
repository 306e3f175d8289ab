"""Whatever the database does between bulkRegister and its mark, the cycle gets one job and
its result is on record: a real PostgreSQL behind a relay that fails over (resets every
connection and refuses new ones) or goes silent, the online-session stand-in over real HTTP
honouring the cycle's Idempotency-Key."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from dagster import DagsterInstance
from sqlalchemy import Engine, text

from devstack.online_session import OnlineSessionService
from jlg_pipeline.adapters.database import (
    IDLE_IN_TRANSACTION_S,
    Bounds,
    create_engine,
    ping,
    translate_errors,
)
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import AttemptOutcome, Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.errors import DatabaseUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult, GenerationResult
from jlg_pipeline.domain.messages import cycle_id
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.generation import build_generation_job
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from testkit.fault_proxy import FaultProxy, Mode
from tests.support.resources import database
from tests.support.served import served_app
from tests.support.web import admin_headers

Request = tuple[str, str, dict[str, Any] | None]
STALE_MS = 10_000
"""The completion write is retried for half of it (5 s)."""


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


def _keys(online_session: OnlineSessionService) -> list[str]:
    return [call["headers"].get("Idempotency-Key") for call in online_session.received]


def test_a_result_survives_a_failover_between_bulk_register_and_its_mark(
    engine: Engine, proxied_db: tuple[FaultProxy, str], online_session: OnlineSessionService
) -> None:
    proxy, url = proxied_db
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    faulty = create_engine(url, pool_size=2, max_overflow=2)
    repository = ProgramSessionRepository(faulty, TimingWindows(stale_ms=STALE_MS))
    with HttpRegistrar(online_session.url, "svc-token", timeout_s=5) as http:
        registrar = FailsOverAfterAnswering(http, proxy, [(Mode.REFUSING, 3.0)])
        outcome = generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=registrar,
            trigger=Trigger.EVENT,
        )
    faulty.dispose()
    assert outcome.result is GenerationResult.COMPLETED
    assert time.monotonic() - registrar.started >= 3.0, "it waited out the failover"
    row = session_row(engine, sid)
    assert row["link_generation_status"] == "COMPLETED"
    assert row["link_generation_job_id"] == outcome.job_id
    assert len(online_session.received) == 1, "one bulkRegister call for the cycle"
    assert _keys(online_session) == [cycle_id(sid, row["link_generation_at"])]
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert (attempt.outcome, attempt.job_id) == (AttemptOutcome.COMPLETED, outcome.job_id)


def test_a_retry_of_the_run_resumes_its_own_claim_and_the_cycle_stays_one_job(
    engine: Engine,
    db_url: str,
    proxied_db: tuple[FaultProxy, str],
    online_session: OnlineSessionService,
) -> None:
    """The failover outlasts the completion write's retries: the step fails retryably, and
    its retry in the same run resumes the claim it holds (before, it skipped it and left the
    session IN_PROGRESS for the watchdog, which called bulkRegister a second time with nothing
    on record). The second call carries the same Idempotency-Key: the service answers the
    same job."""
    proxy, url = proxied_db
    sid = create_session(engine)
    force_state(engine, sid, LinkGenerationStatus.SCHEDULED)
    instance = DagsterInstance.ephemeral()
    with HttpRegistrar(online_session.url, "svc-token", timeout_s=5) as http:
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
    assert set(_keys(online_session)) == {key}, "every call named the cycle"
    assert len(online_session.received) == 2, "the retry called again, under the same key"
    assert online_session.jobs == {key: row["link_generation_job_id"]}, "one job for the cycle"
    [attempt] = ProgramSessionRepository(engine).attempts(sid)
    assert attempt.attempt == 1, "the retry resumed attempt 1 instead of taking a new one"
    assert (attempt.outcome, attempt.job_id) == (AttemptOutcome.COMPLETED, online_session.jobs[key])
    assert attempt.run_id == result.run_id


def test_a_silent_database_fails_each_call_within_its_bound_and_heals(
    engine: Engine, proxied_db: tuple[FaultProxy, str]
) -> None:
    """A PostgreSQL that accepts and never answers: a call on a pooled connection, one on a
    new connection and one caught mid-statement each fail (DatabaseUnavailable) within their
    bounds, instead of waiting for the network to heal; then everything works again."""
    proxy, url = proxied_db
    sid = create_session(engine)
    bounds = Bounds(hold_s=3.0)
    faulty = create_engine(url, pool_size=1, max_overflow=1, pool_timeout_s=5, bounds=bounds)
    repository = ProgramSessionRepository(faulty)
    try:
        assert repository.get_state(sid) is not None  # a pooled connection, known good
        proxy.mode = Mode.SILENT
        for _ in range(2):  # the pooled connection's check, then a new connection
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable):
                repository.get_state(sid)
            assert time.monotonic() - started < bounds.ping_s + bounds.connect_s + 1.0

        proxy.mode = Mode.PASSING
        healed = time.monotonic()
        while not _answers(repository, sid):
            assert time.monotonic() - healed < 3.0, "a connect is tried again within 1 s"
            time.sleep(0.1)

        def silence_soon() -> None:
            time.sleep(0.5)
            proxy.mode = Mode.SILENT

        threading.Thread(target=silence_soon, daemon=True).start()
        started = time.monotonic()
        with (
            pytest.raises(DatabaseUnavailable),
            faulty.connect() as conn,
            translate_errors("sleeping"),
        ):
            conn.execute(text("SELECT pg_sleep(30)"))
        assert time.monotonic() - started < 3.0 + 1.0, "the hold bound cut the statement"
        proxy.mode = Mode.PASSING
        healed = time.monotonic()
        while not _answers(repository, sid):
            assert time.monotonic() - healed < 3.0
            time.sleep(0.1)
    finally:
        faulty.dispose()


def _answers(repository: ProgramSessionRepository, sid: int) -> bool:
    try:
        return repository.get_state(SessionId(sid)) is not None
    except DatabaseUnavailable:
        return False


def test_readiness_on_its_own_connection_answers_within_its_deadline(
    proxied_db: tuple[FaultProxy, str],
) -> None:
    proxy, url = proxied_db
    ping(url)
    proxy.mode = Mode.SILENT
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable):
        ping(url)
    assert time.monotonic() - started < 3.0
    proxy.mode = Mode.REFUSING
    with pytest.raises(DatabaseUnavailable):
        ping(url)
    proxy.mode = Mode.PASSING
    ping(url)


def test_the_served_api_answers_within_6_s_while_the_database_is_silent(
    engine: Engine, proxied_db: tuple[FaultProxy, str], tmp_path: Path
) -> None:
    """Every admin answer within 6 s (503 allowed), /readyz 503 within 3 s, and all normal
    within 10 s of the heal, under uvicorn as the image serves it."""
    proxy, url = proxied_db
    sids = [create_session(engine) for _ in range(3)]
    with (
        served_app(url, tmp_path / "web.log") as (base, _, _),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        assert client.get(_path(sids[0]), headers=admin_headers()).status_code == 200
        proxy.mode = Mode.SILENT

        def timed(request: Request) -> tuple[str, int, float]:
            method, path, body = request
            started = time.monotonic()
            response = client.request(method, path, headers=admin_headers(), json=body)
            return path, response.status_code, time.monotonic() - started

        later: dict[str, Any] = {"linkGenerationAt": "2031-01-01T09:00:00Z"}
        reads: list[Request] = [("GET", _path(sid), None) for sid in sids]
        writes: list[Request] = [("PATCH", _path(sid), later) for sid in sids]
        ready: list[Request] = [("GET", "/readyz", None)]
        requests = reads * 3 + writes + ready * 2
        with ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(timed, requests))
        for path, status, took in answers:
            assert status in (200, 503), (path, status)
            assert took < (3.0 if path == "/readyz" else 6.0), (path, status, took)
        assert any(status == 503 for _, status, _ in answers)

        proxy.mode = Mode.PASSING
        healed = time.monotonic()
        while True:
            readiness = client.get("/readyz").status_code
            read = client.get(_path(sids[0]), headers=admin_headers()).status_code
            if (readiness, read) == (200, 200):
                break
            assert time.monotonic() - healed < 10.0, (readiness, read)
            time.sleep(0.2)


def _path(sid: int) -> str:
    return f"/program-session/{sid}/link-generation"


def test_a_transaction_whose_client_vanished_frees_its_row_within_the_idle_bound(
    engine: Engine, db_url: str
) -> None:
    """A statement answered into a failover leaves its session idle in a transaction whose
    client is gone (its COMMIT never comes): the server ends it after IDLE_IN_TRANSACTION_S,
    so the session's next write waits that long at most, not its whole bound behind a lock
    held until TCP notices (seen in the e2e failover test: the completion's retry hung 30 s)."""
    sid = create_session(engine)
    zombie = create_engine(db_url).connect()
    zombie.begin()
    zombie.execute(
        text("UPDATE hdb_program_session SET updated_at = now() WHERE id = :id"), {"id": sid}
    )
    started = time.monotonic()
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE hdb_program_session SET updated_at = now() WHERE id = :id"), {"id": sid}
        )
    waited = time.monotonic() - started
    assert IDLE_IN_TRANSACTION_S - 1 < waited < IDLE_IN_TRANSACTION_S + 5
    zombie.invalidate()
