"""The schedule change's fast path, run after the PATCH commits on a few threads of its own,
with a database pool of its own: never the request threads or the request pool, so a hung
EventBridge cannot slow a read, ``/readyz`` or another PATCH. When every worker is busy and
the queue is full the call is dropped: the change stays pending and
``join_link_schedule_sync_job`` applies it (a near time goes direct through the sync sensor)."""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)

FAST_PATH_WORKERS = 4
FAST_PATH_QUEUE = 64
SHUTDOWN_WAIT_S = 10.0


class ScheduleFastPath:
    def __init__(self, workers: int = FAST_PATH_WORKERS, queue: int = FAST_PATH_QUEUE) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fast-path")
        self._slots = threading.BoundedSemaphore(workers + queue)
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()
        self.dropped = 0

    def submit(self, call: Callable[[], Any]) -> None:
        """Run ``call`` soon on a fast-path thread, or drop it when the queue is full; never
        blocks the caller."""
        if not self._slots.acquire(blocking=False):
            self.dropped += 1
            log_event(
                logger,
                logging.WARNING,
                "schedule_sync.fast_path_busy",
                note="left pending; join_link_schedule_sync_job applies it",
            )
            return
        future = self._pool.submit(call)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: "Future[Any]") -> None:
        with self._lock:
            self._pending.discard(future)
        self._slots.release()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every call submitted so far; False if some are
        still running."""
        with self._lock:
            pending = set(self._pending)
        return not wait(pending, timeout=timeout).not_done

    def shutdown(self, timeout: float = SHUTDOWN_WAIT_S) -> None:
        """Let the calls under way finish for up to ``timeout`` seconds, then stop: whatever
        is still queued is dropped (its change stays pending for the sync job)."""
        self.drain(timeout)
        self._pool.shutdown(wait=False, cancel_futures=True)
