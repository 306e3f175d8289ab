"""Crash recovery, counted: a real ``join_link_generation_job`` run (``dagster job execute``,
HTTP registrar) is stopped inside bulkRegister; after the stale window a real
``join_link_fallback_sweep_job`` run must reclaim and complete the session.

    .venv/bin/python -m bench.crash_recovery [--trials 20] [--zombies 20]

- SIGKILL trials: the run's process group is killed while its bulkRegister call is in flight.
  Recovered = the sweep leaves the session COMPLETED at attempt 2 with the second call's job id.
- zombie trials: the run is frozen (SIGSTOP) instead, the sweep reclaims and completes, then the
  frozen run is resumed and its bulkRegister answered, so it tries to mark its old attempt.
  Overwritten = the session's row changed after that (the fenced mark must be a no-op).

The stale and grace windows are shortened with JLG_TEST_STALE_MS / JLG_TEST_GRACE_MS, the
same configuration the end-to-end tests use; the constants keep their production values.
"""

import argparse
import json
import os
import signal
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from bench.common import (
    add_registrants,
    add_sessions,
    bench_database,
    dagster_env,
    execute_job,
    machine,
    sweep,
    table,
)
from jlg_pipeline.adapters.database import create_engine

STALE_MS = 3000


class OnlineSession:
    """A fake online-session service: the first bulkRegister of a session is held until the
    trial releases it; later calls answer at once. Job ids say which call they answered."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}
        self.arrived: dict[int, threading.Event] = {}
        self.release: dict[int, threading.Event] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sid = int(body["sessionId"])
                with outer.lock:
                    outer.calls[sid] = call = outer.calls.get(sid, 0) + 1
                    arrived = outer.arrived.setdefault(sid, threading.Event())
                    release = outer.release.setdefault(sid, threading.Event())
                if call == 1:
                    arrived.set()
                    release.wait(120)
                payload = json.dumps({"jobId": f"job-{sid}-{call}", "total": 10}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the caller was killed

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.1,), daemon=True).start()

    def wait_first_call(self, sid: int, timeout: float) -> bool:
        with self.lock:
            arrived = self.arrived.setdefault(sid, threading.Event())
        return arrived.wait(timeout)

    def release_first_call(self, sid: int) -> None:
        with self.lock:
            self.release.setdefault(sid, threading.Event()).set()


def _row(engine: Engine, sid: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(
            conn.execute(
                text(
                    "SELECT link_generation_status, link_generation_attempt,"
                    " link_generation_job_id, link_generation_last_error, updated_at"
                    " FROM hdb_program_session WHERE id = :id"
                ),
                {"id": sid},
            )
            .mappings()
            .one()
        )


def _sweep(env: dict[str, str]) -> None:
    code, err = sweep(env, timeout=120)
    if code != 0:
        raise RuntimeError(f"the sweep run failed: {err[-2000:]}")


def trial(engine: Engine, service: OnlineSession, env: dict[str, str], zombie: bool) -> str:
    """One trial; returns 'recovered', 'overwritten' or what went wrong instead."""
    sid = add_sessions(engine, 1, due=True)[0]
    config = Path(env["TMPDIR"]) / f"run-{sid}.yaml"
    config.write_text(  # JSON is YAML
        json.dumps({"ops": {"generate_join_links": {"config": {"programSessionId": sid}}}})
    )
    run = execute_job("join_link_generation_job", env, "-c", str(config))
    try:
        if not service.wait_first_call(sid, 60):
            return "the run never reached bulkRegister"
        os.killpg(run.pid, signal.SIGSTOP if zombie else signal.SIGKILL)
        if _row(engine, sid)["link_generation_status"] != "IN_PROGRESS":
            return "not IN_PROGRESS while bulkRegister was in flight"
        time.sleep(STALE_MS / 1000 + 0.5)
        _sweep(env)
        recovered = _row(engine, sid)
        if (
            recovered["link_generation_status"] != "COMPLETED"
            or recovered["link_generation_attempt"] != 2
            or recovered["link_generation_job_id"] != f"job-{sid}-2"
        ):
            return f"not recovered: {recovered}"
        if zombie:
            service.release_first_call(sid)
            os.killpg(run.pid, signal.SIGCONT)
            _, err = run.communicate(timeout=60)
            if service.calls[sid] != 2:
                return f"{service.calls[sid]} bulkRegister calls"
            if _row(engine, sid) != recovered:
                return "overwritten"
            if b"generation.superseded" not in err:
                return "the resumed run never tried to mark"
        return "recovered"
    finally:
        service.release_first_call(sid)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            os.killpg(run.pid, signal.SIGCONT)
        run.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--zombies", type=int, default=20)
    args = parser.parse_args()
    service = OnlineSession()
    with (
        bench_database("jlg_bench_crash") as url,
        bench_database("jlg_bench_crash_dagster", migrated=False) as dagster_url,
        tempfile.TemporaryDirectory(prefix="jlg-bench-crash-") as home,
    ):
        engine = create_engine(url)
        add_registrants(engine, 10)
        env = dagster_env(
            Path(home),
            dagster_url,
            url,
            JLG_REGISTRAR="http",
            JLG_ONLINE_SESSION_URL=service.url,
            JLG_ONLINE_SESSION_TOKEN="bench-token",  # noqa: S106 - the fake service's
            JLG_TEST_STALE_MS=str(STALE_MS),
            JLG_TEST_GRACE_MS="1000",
        )
        rows: list[tuple[str, ...]] = []
        for mode, count in (
            ("SIGKILL the run inside bulkRegister", args.trials),
            ("SIGSTOP it there; resume it after the reclaim completed", args.zombies),
        ):
            outcomes = [trial(engine, service, env, zombie="SIGSTOP" in mode) for _ in range(count)]
            others = sorted({o for o in outcomes if o not in ("recovered", "overwritten")})
            rows.append(
                (
                    mode,
                    str(count),
                    str(outcomes.count("recovered")),
                    str(outcomes.count("overwritten")),
                    "; ".join(others) or "-",
                )
            )
        engine.dispose()
    service.server.shutdown()
    table(
        f"Crash recovery through real Dagster runs ({machine()})",
        rows,
        ("trial", "tried", "recovered by stale reclaim", "overwritten by the zombie", "other"),
    )


if __name__ == "__main__":
    main()
