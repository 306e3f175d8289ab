"""The one way tests and benchmarks launch the admin API in its own process: as the image
runs it (``python -m web``, ``web/server.py``), or, for a benchmark's side-by-side baseline, an
app factory under plain uvicorn."""

import subprocess
import sys
from pathlib import Path

from devstack.ports import free_port, wait_until_answers
from web.server import command

ROOT = Path(__file__).resolve().parent.parent


def start_web(
    env: dict[str, str],
    *,
    log: Path | None = None,
    factory: str | None = None,
    workers: int = 1,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the app with ``env`` (its output to ``log`` if given, else nowhere: its access
    log would drown a benchmark's table) and wait until it answers
    ``/healthz`` (any answer, for a ``factory`` that has none); the process and its base URL.
    The caller stops it."""
    port = free_port()
    if factory is None:
        argv = command("127.0.0.1", port, sys.executable)
    else:
        argv = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            factory,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
    if log is None:
        process = subprocess.Popen(  # noqa: S603
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
    else:
        with log.open("wb") as output:  # the server keeps its own copy open
            process = subprocess.Popen(  # noqa: S603
                argv, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
            )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(f"{url}/healthz", 30, lambda: process.poll() is None)
    except BaseException:
        stop_web(process)
        raise
    if process.poll() is not None:
        raise RuntimeError(
            f"the app exited with {process.returncode}" + (f"; see {log}" if log else "")
        )
    return process, url


def stop_web(process: subprocess.Popen[bytes]) -> None:
    """Stop it as a deployment would (SIGTERM): it finishes what it answered first (its fast
    path may still wait on a silent AWS), up to its own shutdown bound; then it is killed."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
