"""Leases (docs/design.md "Delivery guarantees"): a live attempt renews its claim however slow
bulkRegister is; a stopped process renews nothing, is reclaimed, and is fenced on resume."""

import json
import signal
import subprocess
import sys
import threading
import time

from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationResult
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, session_row
from tests.support import ROOT
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus
STALE_MS = 1000


def test_a_bulk_register_slower_than_three_stale_windows_keeps_its_claim(
    engine: Engine,
) -> None:
    repository = ProgramSessionRepository(engine, TimingWindows(stale_ms=STALE_MS))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    registrar = RecordingRegistrar(block=True)
    outcomes = []
    first = threading.Thread(
        target=lambda: outcomes.append(
            generate_for_session(
                BulkRegisterRequest.parse(sid),
                repository=repository,
                registrar=registrar,
                trigger=Trigger.EVENT,
            )
        )
    )
    first.start()
    assert registrar.entered.wait(5)

    skips = []
    for _ in range(7):  # 3.5 stale windows while bulkRegister runs
        time.sleep(STALE_MS / 2000)
        skips.append(
            generate_for_session(
                BulkRegisterRequest.parse(sid),
                repository=repository,
                registrar=registrar,
                trigger=Trigger.CRON,
            )
        )
    registrar.release.set()
    first.join(10)

    assert [o.result for o in skips] == [GenerationResult.SKIPPED] * 7
    assert all("holds the claim" in (o.reason or "") for o in skips)
    assert len(registrar.calls) == 1
    assert outcomes[0].result is GenerationResult.COMPLETED
    assert session_row(engine, sid)["link_generation_status"] == S.COMPLETED.value


def test_a_stopped_run_is_reclaimed_and_fenced_on_resume(db_url: str, engine: Engine) -> None:
    repository = ProgramSessionRepository(engine, TimingWindows(stale_ms=STALE_MS))
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.slow_generation",
            db_url,
            str(sid),
            "4",
            str(STALE_MS),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "dispatched"
        time.sleep(0.5)  # at least one renewal happened
        process.send_signal(signal.SIGSTOP)
        time.sleep(STALE_MS / 1000 + 0.5)

        successor = repository.claim(sid)
        assert successor is not None, "a stopped run renews nothing and goes stale"
        assert repository.mark_completed(successor, "successor-job")

        process.send_signal(signal.SIGCONT)
        out, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    zombie = json.loads(out.strip().splitlines()[-1])
    assert zombie == {"result": "superseded", "attempt": successor.attempt - 1}
    row = session_row(engine, sid)
    assert (row["link_generation_status"], row["link_generation_job_id"]) == (
        S.COMPLETED.value,
        "successor-job",
    )


def test_renew_is_fenced_to_the_attempt_holding_the_claim(engine: Engine) -> None:
    repository = ProgramSessionRepository(engine)
    sid = create_session(engine)
    force_state(engine, sid, S.SCHEDULED)
    claim = repository.claim(sid)
    assert claim is not None
    assert repository.renew(claim)
    assert repository.mark_completed(claim, "job")
    assert not repository.renew(claim), "a finished attempt renews nothing"
    assert session_row(engine, sid)["link_generation_status"] == S.COMPLETED.value
