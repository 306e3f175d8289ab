"""/readyz's check (web/readiness.py): calls at once share one check, a result answers for a
second, a failure is every caller's 503 in that second, and a check runs alone."""

import asyncio
import threading

import pytest

from jlg_pipeline.domain.errors import DatabaseUnavailable
from web.readiness import REUSE_S, Readiness


class Check:
    def __init__(self) -> None:
        self.calls = 0
        self.running = 0
        self.most_at_once = 0
        self.failing = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.calls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        try:
            if self.failing:
                raise DatabaseUnavailable("database unavailable while checking readiness")
        finally:
            with self._lock:
                self.running -= 1


async def _many(readiness: Readiness, count: int) -> list[BaseException | None]:
    return list(
        await asyncio.gather(*(readiness.ensure() for _ in range(count)), return_exceptions=True)
    )


def test_calls_at_once_share_one_check_and_each_second_gets_a_fresh_one() -> None:
    now = [100.0]
    check = Check()
    readiness = Readiness(check, clock=lambda: now[0])
    assert asyncio.run(_many(readiness, 400)) == [None] * 400
    assert (check.calls, check.most_at_once) == (1, 1)
    now[0] += REUSE_S / 2
    asyncio.run(_many(readiness, 10))
    assert check.calls == 1, "reused within the second"
    now[0] += REUSE_S
    asyncio.run(_many(readiness, 10))
    assert check.calls == 2


def test_a_failure_is_every_callers_503_until_the_next_check() -> None:
    now = [0.0]
    check = Check()
    check.failing = True
    readiness = Readiness(check, clock=lambda: now[0])
    failures = asyncio.run(_many(readiness, 50))
    assert all(isinstance(f, DatabaseUnavailable) for f in failures)
    assert len({id(f) for f in failures}) == 50, "a fresh error each: no traceback grows"
    assert check.calls == 1
    check.failing = False
    now[0] += REUSE_S
    asyncio.run(readiness.ensure())
    assert check.calls == 2


def test_anything_but_an_unavailable_database_is_not_swallowed() -> None:
    def broken() -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError):
        asyncio.run(Readiness(broken).ensure())
