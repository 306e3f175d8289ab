"""Run-cost benchmark: the whole-process cost of one ``join_link_generation_job`` run (a real
generation through the local registrar) vs an empty one-op job, both executed the same way
(``dagster job execute``, in-process executor, one PostgreSQL-backed instance).

    .venv/bin/python -m bench.timing.runs [--repeat 5]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    BIN,
    ROOT,
    Targets,
    bench_database,
    machine,
    status_counts,
    strict_option,
    table,
)
from devstack.system import system_env
from jlg_pipeline.adapters.database import create_engine
from testkit.factories import DUE, add_registrations, create_sessions

DAGSTER = str(BIN / "dagster")
EMPTY_JOB = [
    DAGSTER,
    "job",
    "execute",
    "-f",
    str(ROOT / "bench" / "timing" / "empty_job.py"),
    "-j",
    "empty_job",
]


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(seconds, peak RSS in KiB) of one command, timed and measured by wait4."""
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(
            f"{argv} failed: {process.stderr.read().decode()[-2000:] if process.stderr else ''}"
        )
    return elapsed, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    strict_option(parser)
    args = parser.parse_args()
    with (
        bench_database("jlg_bench_runs") as url,
        bench_database("jlg_bench_runs_dagster", migrated=False) as dagster_url,
    ):
        engine = create_engine(url)
        add_registrations(engine, 1, 50)
        create_sessions(engine, args.repeat + 1, at_offset=DUE)
        engine.dispose()
        home = Path(tempfile.mkdtemp(prefix="jlg-bench-home-"))
        env = system_env(home, dagster_url, url, JLG_REGISTRAR="local")
        config = home / "run.yaml"
        real, empty = [], []
        try:
            for i in range(args.repeat + 1):
                config.write_text(
                    f"ops:\n  generate_join_links:\n    config:\n      programSessionId: {i + 1}\n"
                )
                real_run = measure(
                    [
                        DAGSTER,
                        "job",
                        "execute",
                        "-m",
                        "jlg_pipeline.definitions",
                        "-j",
                        "join_link_generation_job",
                        "-c",
                        str(config),
                    ],
                    env,
                )
                empty_run = measure(EMPTY_JOB, env)
                if i:  # the first pair warms the disk cache and the instance's tables
                    real.append(real_run)
                    empty.append(empty_run)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        engine = create_engine(url)
        done = status_counts(engine)["COMPLETED"]
        engine.dispose()
        assert done == args.repeat + 1, f"only {done} sessions completed"
    targets = Targets()
    rt, et = statistics.median(t for t, _ in real), statistics.median(t for t, _ in empty)
    rm, em = max(m for _, m in real), max(m for _, m in empty)
    table(
        f"Run cost: `dagster job execute`, median of {args.repeat} ({machine()})",
        [
            (
                "join_link_generation_job (1 generation)",
                f"{rt:.2f}",
                f"{rm / 1024:.0f}",
                f"{rt / et:.2f}x",
                f"{rm / em:.2f}x",
                " ".join(
                    (
                        targets.at_most("run time vs an empty job", rt / et, 1.3),
                        targets.at_most("peak memory vs an empty job", rm / em, 1.3),
                    )
                ),
            ),
            ("empty one-op job", f"{et:.2f}", f"{em / 1024:.0f}", "1.00x", "1.00x", ""),
        ],
        (
            "job",
            "seconds",
            "peak MiB",
            "time vs empty (≤ 1.3x)",
            "memory vs empty (≤ 1.3x)",
            "",
        ),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
