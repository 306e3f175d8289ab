"""LOCAL ONLY: the processes of a Dagster deployment on this machine, for the tests and
benchmarks that kill them mid-work."""

import contextlib
from pathlib import Path


def run_worker_pids() -> set[int]:
    """Processes executing a Dagster run: the code server starts each as a multiprocessing
    child (``spawn_main``)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            command = (proc / "cmdline").read_bytes()
            if b"multiprocessing.spawn" in command and b"spawn_main" in command:
                found.add(int(proc.name))
    return found
