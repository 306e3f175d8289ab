"""Deadlines on sockets: past its deadline a socket is shut down, so whatever is blocked on it
(a query to a database that stopped answering, a driver waiting for a reply that never
comes) fails at once with a connection error instead of waiting for TCP to give up, which
takes minutes, or for ever when the peer still acknowledges. One thread per process keeps
every deadline, so arming one costs a heap push, not a thread."""

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator


class SocketDeadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int]] = []
        self._armed: dict[int, int] = {}
        """token -> file descriptor, for the deadlines not yet disarmed or fired."""
        self._tokens = itertools.count(1)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, fd: int, seconds: float) -> int:
        """Shut ``fd``'s socket down ``seconds`` from now unless :meth:`disarm` comes first;
        returns the token to disarm it with."""
        token = next(self._tokens)
        with self._wake:
            self._armed[token] = fd
            heapq.heappush(self._heap, (time.monotonic() + seconds, token, fd))
            self._start()
            self._wake.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._wake:
            self._armed.pop(token, None)

    @contextlib.contextmanager
    def bounded(self, fd: int, seconds: float) -> Iterator[None]:
        token = self.arm(fd, seconds)
        try:
            yield
        finally:
            self.disarm(token)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="socket-deadlines", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # disarmed
                if not self._heap:
                    self._wake.wait()
                    continue
                due, token, fd = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                # Still armed: the socket is still the one it was armed for, since a closed
                # connection disarms before its descriptor can be reused.
                if self._armed.pop(token, None) is None:
                    continue
                shut_down(fd)


def shut_down(fd: int) -> None:
    """Shut the socket behind ``fd`` down both ways (its owner's next read fails) without
    closing the descriptor, which stays its owner's to close."""
    with contextlib.suppress(OSError):
        duplicate = socket.socket(fileno=os.dup(fd))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


DEADLINES = SocketDeadlines()
"""The process's one keeper."""
