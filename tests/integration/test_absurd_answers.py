"""One upstream answer cannot stop the system (docs/design.md "Trust boundaries", "No single
answer"): the audit's probes, reproduced here as sent, through the real HTTP registrar against
the local stand-in and the gate against PostgreSQL. Each ``Retry-After`` below either paused
every caller until 2058, 5195 or 9999-12-31, or raised inside the gate and left its session
IN_PROGRESS until the stale window; now a pause lasts at most the bound, then one probe asks
again, and every session ends FAILED with its retry due."""

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from devstack.online_session import Answer, OnlineSessionService, online_session_service
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.registrars.http import HttpRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.cli import main
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import GenerationFailed, RetryableGenerationFailed
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationResult
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support.logs import fields_of
from web.metrics import service_figures

S = LinkGenerationStatus
MAX_PAUSE_S = 60.0
AUDITED = [
    "999999999",
    "99999999999",
    "9999999999999",
    str(10**23),
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "-1",
    "1e9",
    "Thu, 01 Jan 1970 00:00:00 GMT",
]


@pytest.fixture(scope="module")
def service() -> Iterator[OnlineSessionService]:
    with online_session_service() as service:
        yield service


def _generate(
    repository: ProgramSessionRepository, service: OnlineSessionService, view: ServiceView
) -> tuple[int, GenerationResult | GenerationFailed]:
    sid = create_session(repository.engine)
    force_state(repository.engine, sid, S.SCHEDULED)
    with HttpRegistrar(service.url, "svc-token-absurd", timeout_s=5) as registrar:
        try:
            outcome = generate_for_session(
                BulkRegisterRequest.parse(sid),
                repository=repository,
                registrar=registrar,
                trigger=Trigger.EVENT,
                view=view,
            )
        except GenerationFailed as failed:
            return sid, failed
    return sid, outcome.result


def _seconds_ahead(engine: Engine, column: str) -> float | None:
    with engine.connect() as conn:
        return conn.execute(
            text(f"SELECT extract(epoch FROM {column} - now()) FROM jlg_service_view")
        ).scalar()


def _clear(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM jlg_service_view"))


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("retry_after", AUDITED)
def test_no_retry_after_pauses_past_the_bound_or_leaves_a_session_in_progress(
    engine: Engine,
    repository: ProgramSessionRepository,
    service: OnlineSessionService,
    status: int,
    retry_after: str,
) -> None:
    _clear(engine)
    view = ServiceView(engine, Budget(max_pause_s=MAX_PAUSE_S))
    service.answer = Answer(status=status, body=b"{}", headers={"Retry-After": retry_after})
    sid, result = _generate(repository, service, view)
    assert isinstance(result, RetryableGenerationFailed), result
    row = session_row(engine, sid)
    assert row["link_generation_status"] == "FAILED", "never IN_PROGRESS until the stale window"
    assert row["link_generation_retry_at"] is not None, "its retry is due"
    paused_s = _seconds_ahead(engine, "paused_until")
    assert paused_s is None or paused_s <= MAX_PAUSE_S, f"paused {paused_s} s"
    retry_s = _seconds_ahead(
        engine, f"(SELECT link_generation_retry_at FROM hdb_program_session WHERE id = {sid})"
    )
    assert retry_s is None or retry_s <= MAX_PAUSE_S


def test_when_the_bounded_pause_ends_one_probe_asks_again_and_a_spent_quota_pauses_again(
    engine: Engine, repository: ProgramSessionRepository, service: OnlineSessionService
) -> None:
    _clear(engine)
    view = ServiceView(engine, Budget(max_pause_s=MAX_PAUSE_S))
    service.answer = Answer(status=429, body=b"{}", headers={"Retry-After": "999999999"})
    _generate(repository, service, view)
    calls = len(service.received)
    assert _generate(repository, service, view)[1] is GenerationResult.SKIPPED, "paused"
    assert len(service.received) == calls
    with engine.begin() as conn:  # what time does: the bounded pause ends
        conn.execute(text("UPDATE jlg_service_view SET paused_until = now()"))
    _, probed = _generate(repository, service, view)
    assert isinstance(probed, RetryableGenerationFailed), "the probe asked; still spent"
    assert len(service.received) == calls + 1
    paused_s = _seconds_ahead(engine, "paused_until")
    assert paused_s is not None, "paused again"
    assert 0 < paused_s <= MAX_PAUSE_S, "within the bound"
    service.answer = Answer()
    with engine.begin() as conn:
        conn.execute(text("UPDATE jlg_service_view SET paused_until = now()"))
    assert _generate(repository, service, view)[1] is GenerationResult.COMPLETED


def test_a_row_an_older_release_left_paused_for_decades_holds_no_longer_than_the_bound(
    engine: Engine, repository: ProgramSessionRepository, service: OnlineSessionService
) -> None:
    _clear(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_service_view (name, paused_until, probe_until, next_slot_at)"
                " VALUES ('online-session', '9999-12-31', '2058-01-01', '5195-01-01')"
            )
        )
    view = ServiceView(engine, Budget(rate=10, max_pause_s=MAX_PAUSE_S))
    look = view.look()
    assert look.state.paused_until is not None
    assert look.state.paused_until <= look.now + timedelta(seconds=MAX_PAUSE_S)
    assert _generate(repository, service, view)[1] is GenerationResult.SKIPPED
    for column in ("paused_until", "probe_until", "next_slot_at"):
        ahead = _seconds_ahead(engine, column)
        assert ahead is not None
        assert ahead <= MAX_PAUSE_S, f"{column} stored {ahead} s ahead"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    status=st.sampled_from([429, 500, 503]),
    raw=st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=40
    ),
)
def test_any_retry_after_ends_failed_with_its_retry_due_and_the_pause_bounded(
    engine: Engine,
    repository: ProgramSessionRepository,
    service: OnlineSessionService,
    status: int,
    raw: str,
) -> None:
    _clear(engine)
    view = ServiceView(engine, Budget(max_pause_s=MAX_PAUSE_S))
    service.answer = Answer(status=status, body=b"{}", headers={"Retry-After": raw.strip() or "x"})
    sid, result = _generate(repository, service, view)
    assert isinstance(result, RetryableGenerationFailed)
    assert session_row(engine, sid)["link_generation_status"] == "FAILED"
    paused_s = _seconds_ahead(engine, "paused_until")
    assert paused_s is None or paused_s <= MAX_PAUSE_S


def test_an_operator_sees_the_view_and_resume_clears_a_pause_and_an_open_breaker(
    db_url: str,
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JLG_ENVIRONMENT", "local")
    _clear(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_service_view (name, paused_until, failures, down_since)"
                " VALUES ('online-session', now() + interval '10 minutes', 5, now())"
            )
        )
    assert main(["--database-url", db_url, "service", "show"]) == 0
    shown = capsys.readouterr().out
    assert "pause            until" in shown
    assert "breaker          OPEN since" in shown
    assert "backlog          0 due session(s)" in shown

    with caplog.at_level(logging.INFO):
        assert main(["--database-url", db_url, "service", "resume", "--by", "ops-alice"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("resumed (it was paused, breaker open)")
    assert "last resumed" in out
    assert "by ops-alice" in out
    state = ServiceView(engine).look().state
    assert (state.paused_until, state.down, state.failures) == (None, False, 0)
    assert state.resumed_by == "ops-alice"
    assert state.healed_at == state.resumed_at, "every session the breaker held is due at once"
    (logged,) = fields_of(caplog, "service.resumed")
    assert logged["by"] == "ops-alice"
    figures = {m.name: m for m in service_figures(read_metrics_snapshot(engine))}
    resumed = figures["jlg_online_session_resumed_timestamp_seconds"].samples[0].value
    assert state.resumed_at is not None
    assert resumed == state.resumed_at.timestamp()


@pytest.mark.parametrize("by", ["x\nINFO forged", "ops\u202ebob", "ops\u2028x", "x" * 65, " "])
def test_resume_refuses_an_operator_name_that_could_forge_a_log_line(
    db_url: str, by: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsed as every actor's name is: bounded, no control, separator or bidi character (a
    U+202E printed raw by ``jlg service show`` reordered the line an operator reads)."""
    monkeypatch.setenv("JLG_ENVIRONMENT", "local")
    assert main(["--database-url", db_url, "service", "resume", "--by", by]) == 2
    assert "--by must be" in capsys.readouterr().err


def test_every_resume_is_kept_and_shown(
    db_url: str,
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A later resume no longer overwrites the one before: each is a row of its own, which
    ``jlg service show`` lists newest first, with what it cleared."""
    monkeypatch.setenv("JLG_ENVIRONMENT", "local")
    _clear(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_service_view (name, paused_until)"
                " VALUES ('online-session', now() + interval '10 minutes')"
            )
        )
    assert main(["--database-url", db_url, "service", "resume", "--by", "ops-alice"]) == 0
    assert main(["--database-url", db_url, "service", "resume", "--by", "ops-bob"]) == 0
    capsys.readouterr()
    assert main(["--database-url", db_url, "service", "show"]) == 0
    shown = capsys.readouterr().out.splitlines()

    resumes = [line for line in shown if line.startswith("resumed ")]
    assert len(resumes) == 2
    assert "by ops-bob" in resumes[0]
    assert "(it was clear, breaker closed)" in resumes[0]
    assert "by ops-alice" in resumes[1]
    assert "(it was paused, breaker closed)" in resumes[1]
    with engine.connect() as conn:
        kept = (
            conn.execute(text("SELECT resumed_by FROM jlg_service_resume ORDER BY id"))
            .scalars()
            .all()
        )
    assert kept == ["ops-alice", "ops-bob"]
