"""The race: many separate connections, threads and processes, claiming one session at the
same instant. Exactly one wins every round; losing never raises."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.status import LinkGenerationStatus
from testkit.claim_race import claim_race
from testkit.factories import create_session, force_state, session_row

S = LinkGenerationStatus
THREADS = 16
THREAD_ROUNDS = 60
PROCESSES = 8
PROCESS_ROUNDS = 40
# Each round starts from a different claimable state.
ROUND_STATES = [
    (S.SCHEDULED, timedelta(0)),
    (S.FAILED, timedelta(0)),
    (S.IN_PROGRESS, timedelta(minutes=-31)),
]


def test_threads_on_separate_connections_one_winner_per_round(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine)
    barrier = threading.Barrier(THREADS)

    def contender() -> int | None:
        barrier.wait()  # the pool holds more connections than threads: one each
        claim = repository.claim(sid)
        return None if claim is None else claim.attempt

    with ThreadPoolExecutor(THREADS) as pool:
        for round_no in range(THREAD_ROUNDS):
            status, offset = ROUND_STATES[round_no % len(ROUND_STATES)]
            force_state(engine, sid, status, updated_offset=offset)
            attempt_before = session_row(engine, sid)["link_generation_attempt"]
            results = list(pool.map(lambda _: contender(), range(THREADS)))
            winners = [r for r in results if r is not None]
            assert len(winners) == 1, f"round {round_no}: {len(winners)} winners"
            assert winners[0] == attempt_before + 1
            assert session_row(engine, sid)["link_generation_status"] == S.IN_PROGRESS.value


def test_processes_one_winner_per_round(engine: Engine, db_url: str) -> None:
    sid = create_session(engine)
    with claim_race(db_url, sid, PROCESSES) as run_round:
        for round_no in range(PROCESS_ROUNDS):
            status, offset = ROUND_STATES[round_no % len(ROUND_STATES)]
            force_state(engine, sid, status, updated_offset=offset)
            winners = [a for a in run_round() if a is not None]
            assert len(winners) == 1, f"round {round_no}: {len(winners)} winners"


@pytest.mark.parametrize("status", [S.NOT_SCHEDULED, S.COMPLETED, S.IN_PROGRESS])
def test_nobody_wins_an_unclaimable_session(
    engine: Engine, repository: ProgramSessionRepository, status: S
) -> None:
    sid = create_session(engine)
    force_state(engine, sid, status)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: repository.claim(sid), range(8)))
    assert results == [None] * 8
