"""The processes of a Dagster deployment started by a test or benchmark, for the ones that
kill or measure them mid-work. Everything is looked up inside one process group (the
daemon's, which its code servers and their run workers share) so that tests running side by
side never touch each other's processes."""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def group_processes(group: int) -> Iterator[Path]:
    """The /proc entries of the live processes in process group ``group``."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if proc.name.isdigit() and os.getpgid(int(proc.name)) == group:
                yield proc


def _matching(group: int, *parts: bytes) -> set[int]:
    found = set()
    for proc in group_processes(group):
        with contextlib.suppress(OSError):
            command = (proc / "cmdline").read_bytes()
            if all(part in command for part in parts):
                found.add(int(proc.name))
    return found


def run_worker_pids(group: int) -> set[int]:
    """Processes of ``group`` executing a Dagster run: the code server starts each as a
    multiprocessing child (``spawn_main``)."""
    return _matching(group, b"multiprocessing.spawn", b"spawn_main")


def code_server_pids(group: int) -> set[int]:
    """The gRPC code servers of ``group`` (``dagster api grpc``, which the daemon starts)."""
    return _matching(group, b"dagster", b"grpc")
