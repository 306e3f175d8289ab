"""Local registrar benchmark: bulkRegister of 10,000 registrants for one session vs a COPY of
the same join-link rows into the same table.

    .venv/bin/python -m bench.timing.local_registrar [--registrants 10000] [--repeat 3]
"""

import argparse
import secrets
from typing import Any

from sqlalchemy import Engine, text

from bench.common import (
    Targets,
    bench_database,
    machine,
    strict_option,
    table,
    timed,
)
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars.embedded import EmbeddedRegistrar
from jlg_pipeline.domain.constants import DEFAULT_REGISTRAR_BATCH_SIZE
from jlg_pipeline.domain.generation import BulkRegisterRequest
from testkit.factories import NOT_SCHEDULED, add_registrations, create_sessions


def setup(engine: Engine, registrants: int) -> int:
    """``registrants`` eligible registrants and one session of their program; its id."""
    add_registrations(engine, 1, registrants)
    return create_sessions(engine, 1, at_offset=None, status=NOT_SCHEDULED)[0]


def clear_links(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jlg_local_join_link, jlg_local_bulk_job"))


def copy_rows(engine: Engine, session_id: int) -> None:
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        with driver.cursor() as cursor:
            ids = [
                r[0] for r in cursor.execute("SELECT id FROM jlg_local_registration ORDER BY id")
            ]
            with cursor.copy(
                "COPY jlg_local_join_link"
                " (registration_id, program_session_id, join_url, bulk_job_id) FROM STDIN"
            ) as copy:
                for rid in ids:
                    copy.write_row(
                        (
                            rid,
                            session_id,
                            f"https://join.local.invalid/s/{session_id}/{secrets.token_hex(16)}",
                            "copy",
                        )
                    )
        raw.commit()
    finally:
        raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--registrants", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    with bench_database("jlg_bench_registrar") as url:
        engine = create_engine(url)
        session_id = setup(engine, args.registrants)
        registrar = EmbeddedRegistrar(engine)
        bulk, copied = [], []
        for _ in range(args.repeat):
            clear_links(engine)
            bulk.append(
                timed(lambda: registrar.bulk_register(BulkRegisterRequest.parse(session_id)))
            )
            clear_links(engine)
            copied.append(timed(lambda: copy_rows(engine, session_id)))
        b, c = min(bulk), min(copied)
        table(
            f"Local registrar: {args.registrants:,} registrants, batches of "
            f"{DEFAULT_REGISTRAR_BATCH_SIZE} ({machine()})",
            [
                (
                    "EmbeddedRegistrar.bulk_register",
                    f"{b * 1000:.0f}",
                    f"{b / c:.2f}x",
                    "≤ 2x",
                    targets.at_most("bulk_register vs COPY", b / c, 2.0),
                ),
                ("COPY of the same rows", f"{c * 1000:.0f}", "1.00x", "", ""),
            ],
            ("path", "best ms", "vs COPY", "target", ""),
        )
        engine.dispose()
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
