"""Deadlines on sockets: past its deadline a socket is shut down, so whatever is blocked on it
(a query to a database that stopped answering, a driver waiting for a reply that never
comes, a bulkRegister call to a service that accepted and never answers) fails at once with a
connection error instead of waiting for TCP to give up, which takes minutes, or for ever when
the peer still acknowledges. The one mechanism for both clients: the database's connections
(``database.py``, by descriptor) and the online-session service's calls (``CallDeadline``, by
socket, for every socket a call opens). One thread per process keeps every deadline, so
arming one costs a heap push, not a thread. Without it, ``test_database_faults`` and
``test_http_registrar``'s silent-peer tests hang until TCP gives up."""

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator


class SocketDeadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Callable[[], None]] = {}
        """token -> what shuts its socket down, for the deadlines not yet disarmed or fired."""
        self._tokens = itertools.count(1)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, fd: int, seconds: float) -> int:
        """Shut ``fd``'s socket down ``seconds`` from now unless :meth:`disarm` comes first;
        returns the token to disarm it with."""
        return self.arm_action(lambda: shut_down(fd), seconds)

    def arm_action(self, shut: Callable[[], None], seconds: float) -> int:
        """Run ``shut`` ``seconds`` from now unless :meth:`disarm` comes first."""
        token = next(self._tokens)
        with self._wake:
            self._armed[token] = shut
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
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
                due, token = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                # Still armed: the socket is still the one it was armed for, since a closed
                # connection disarms before its descriptor can be reused.
                shut = self._armed.pop(token, None)
                if shut is not None:
                    # Under the lock: a close that disarms waits for it, so the descriptor
                    # is not reused before the shutdown lands.
                    shut()


def shut_down(fd: int) -> None:
    """Shut the socket behind ``fd`` down both ways (its owner's next read fails) without
    closing the descriptor, which stays its owner's to close."""
    with contextlib.suppress(OSError):
        duplicate = socket.socket(fileno=os.dup(fd))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


def shut_socket(sock: socket.socket) -> None:
    """Shut ``sock`` down both ways; a socket already closed is left as it is."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


DEADLINES = SocketDeadlines()
"""The process's one keeper."""


class CallDeadline:
    """One call's deadline over every socket it opens (bulkRegister's: connect, send, the whole
    answer): each socket is shut down when the call's time is up, wherever it is blocked."""

    def __init__(self, seconds: float, keeper: SocketDeadlines = DEADLINES) -> None:
        self._ends = time.monotonic() + seconds
        self._keeper = keeper
        self._tokens: list[int] = []
        self._lock = threading.Lock()

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._ends

    def watch(self, sock: socket.socket) -> None:
        """Cut ``sock`` at the call's deadline (at once when it has passed). The socket object,
        not its descriptor, is kept: a socket closed meanwhile is left alone."""
        left = max(self._ends - time.monotonic(), 0.0)
        with self._lock:
            self._tokens.append(self._keeper.arm_action(lambda: shut_socket(sock), left))

    def close(self) -> None:
        with self._lock:
            for token in self._tokens:
                self._keeper.disarm(token)
            self._tokens.clear()
