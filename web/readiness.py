"""``/readyz``: whether the database answers, checked by at most one PostgreSQL session per
replica at a time and reused for a second. The route needs no login, so without this every
anonymous call opened a session of its own (400 calls: 401 sessions in 6 s, 17 at once),
bounded only by the thread pool against the server's ``max_connections``
(tests/integration/test_server_bounds.py::test_readyz_opens_one_session_at_a_time)."""

import asyncio
import time
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from jlg_pipeline.domain.errors import DatabaseUnavailable

REUSE_S = 1.0
"""How long a result answers every call that asks for it: a probe every few seconds (the
kit's: every 10 s) always gets a fresh one."""


class Readiness:
    """The last check's result, and the one check under way: a caller that arrives while it
    runs waits for it (a coroutine, holding no thread) instead of opening another session."""

    def __init__(
        self,
        check: Callable[[], None],
        reuse_s: float = REUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self._reuse_s = reuse_s
        self._clock = clock
        self._lock = asyncio.Lock()
        self._checked_at = float("-inf")
        self._failure: str | None = None

    async def ensure(self) -> None:
        """Returns when the database answered within the reuse window; raises
        DatabaseUnavailable (a fresh one each time) when it did not."""
        async with self._lock:
            if self._clock() - self._checked_at >= self._reuse_s:
                try:
                    await run_in_threadpool(self._check)
                    self._failure = None
                except DatabaseUnavailable as exc:
                    self._failure = str(exc)
                self._checked_at = self._clock()
            failure = self._failure
        if failure is not None:
            raise DatabaseUnavailable(failure)
