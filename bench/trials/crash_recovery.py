"""Crash recovery, counted: a real ``join_link_generation_job`` run (``dagster job execute``,
HTTP registrar) is stopped inside bulkRegister; after the stale window a real
``join_link_fallback_sweep_job`` run must reclaim and complete the session.

    .venv/bin/python -m bench.trials.crash_recovery [--trials 20] [--zombies 20]

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
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from bench.common import (
    Targets,
    all_met,
    bench_database,
    execute_job,
    machine,
    strict_option,
    sweep,
    table,
)
from devstack.online_session import OnlineSessionService, online_session_service
from devstack.system import system_env
from jlg_pipeline.adapters.database import create_engine
from testkit.factories import DUE, add_registrations, create_sessions

STALE_MS = 10_000


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


def trial(engine: Engine, service: OnlineSessionService, env: dict[str, str], zombie: bool) -> str:
    """One trial; returns 'recovered', 'overwritten' or what went wrong instead."""
    sid = create_sessions(engine, 1, at_offset=DUE)[0]
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
            service.release(sid)
            os.killpg(run.pid, signal.SIGCONT)
            _, err = run.communicate(timeout=60)
            if service.calls_for(sid) != 2:
                return f"{service.calls_for(sid)} bulkRegister calls"
            if _row(engine, sid) != recovered:
                return "overwritten"
            if b"generation.superseded" not in err:
                return "the resumed run never tried to mark"
        return "recovered"
    finally:
        service.release(sid)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            os.killpg(run.pid, signal.SIGCONT)
        run.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--zombies", type=int, default=20)
    strict_option(parser)
    args = parser.parse_args()
    with (
        online_session_service(hold_first_call=True) as service,
        bench_database("jlg_bench_crash") as url,
        bench_database("jlg_bench_crash_dagster", migrated=False) as dagster_url,
        tempfile.TemporaryDirectory(prefix="jlg-bench-crash-") as home,
    ):
        engine = create_engine(url)
        add_registrations(engine, 1, 10)
        env = system_env(
            Path(home),
            dagster_url,
            url,
            JLG_REGISTRAR="http",
            JLG_ONLINE_SESSION_URL=service.url,
            JLG_ONLINE_SESSION_TOKEN="bench-token",  # noqa: S106 - the fake service's
            JLG_TEST_STALE_MS=str(STALE_MS),
            JLG_TEST_GRACE_MS="1000",
            # Under half the stale window, as production's 30 s is under its 15 minutes.
            JLG_ONLINE_SESSION_TIMEOUT_S=str(STALE_MS / 2500),
        )
        rows: list[tuple[str, ...]] = []
        targets = Targets()
        for mode, count in (
            ("SIGKILL the run inside bulkRegister", args.trials),
            ("SIGSTOP it there; resume it after the reclaim completed", args.zombies),
        ):
            outcomes = [trial(engine, service, env, zombie="SIGSTOP" in mode) for _ in range(count)]
            others = sorted({o for o in outcomes if o not in ("recovered", "overwritten")})
            recovered = outcomes.count("recovered")
            overwritten = outcomes.count("overwritten")
            verdicts = (
                targets.at_least(f"{mode}: recovered", recovered, count),
                targets.at_most(f"{mode}: overwritten", overwritten, 0),
            )
            rows.append(
                (
                    mode,
                    str(count),
                    str(recovered),
                    str(overwritten),
                    "; ".join(others) or "-",
                    all_met(verdicts),
                )
            )
        engine.dispose()
    table(
        f"Crash recovery through real Dagster runs ({machine()})",
        rows,
        (
            "trial",
            "tried",
            "recovered by stale reclaim (target: all)",
            "overwritten by the zombie (target: 0)",
            "other",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
