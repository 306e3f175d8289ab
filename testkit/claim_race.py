"""Processes racing for one session's claim, for the concurrency test and bench.timing.gate: each
contender has its own connection; every round releases them all at once."""

import multiprocessing as mp
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier, Event

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.validation import SessionId

Round = Callable[[], list[int | None]]
"""Release every contender once; each one's claimed attempt, or None where it lost."""


def _contend(
    url: str,
    session_id: int,
    start: Barrier,
    done: Barrier,
    stop: Event,
    results: "mp.Queue[int | None]",
) -> None:
    engine = create_engine(url, pool_size=1, max_overflow=0)
    repository = ProgramSessionRepository(engine)
    with engine.connect():
        pass  # connected before the first round: the race is on the claim, not on connecting
    try:
        while True:
            start.wait()
            if stop.is_set():
                return
            claim = repository.claim(SessionId(session_id))
            results.put(None if claim is None else claim.attempt)
            done.wait()
    finally:
        engine.dispose()


@contextmanager
def claim_race(url: str, session_id: int, processes: int) -> Iterator[Round]:
    """``processes`` contenders for ``session_id``; yields the function that runs a round.
    The caller puts the session in the state it wants before each round."""
    ctx = mp.get_context("spawn")
    start, done = ctx.Barrier(processes + 1), ctx.Barrier(processes + 1)
    stop = ctx.Event()
    results: mp.Queue[int | None] = ctx.Queue()
    workers = [
        ctx.Process(
            target=_contend, args=(url, session_id, start, done, stop, results), daemon=True
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()

    def run_round() -> list[int | None]:
        start.wait(timeout=120)
        done.wait(timeout=60)
        return [results.get(timeout=10) for _ in range(processes)]

    try:
        yield run_round
        stop.set()
        start.wait(timeout=30)
    except BaseException:
        start.abort()  # a failed round must not leave the workers waiting on the barriers
        done.abort()
        raise
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
