"""Reliability figures, counted (issue 6). Each section prints what it tried and what broke.

    .venv/bin/python -m bench.trials.reliability [--claims 10000] [--duplicates 100] [--bodies 1000]

- contended claims: 8 processes, one session, rounds until ``--claims`` claim attempts; a
  duplicate is a round with more than one winner (each winner would call bulkRegister);
- duplicate delivery: ``--duplicates`` trials, each 4 concurrent triggers (event, event, cron,
  backfill) for one due session through ``generate_for_session`` and the local registrar;
  counts bulk jobs per session;
- malformed SQS bodies: ``--bodies`` generated bodies (hypothesis) through the sensor's intake
  against a moto queue; counts crashes, runs started and messages left on the queue.
"""

import argparse
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from sqlalchemy import Engine, func, select, text

from bench.common import (
    Targets,
    all_met,
    bench_database,
    contended,
    machine,
    reset_due_sessions,
    strict_option,
    table,
)
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars.embedded import EmbeddedRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.sqs_queue import SqsQueue
from jlg_pipeline.adapters.tables import local_bulk_job
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.services.event_intake import acknowledge, drain
from jlg_pipeline.services.generation import generate_for_session

PROCESSES = 8


def contended_claims(url: str, engine: Engine, claims: int, targets: Targets) -> tuple[str, ...]:
    reset_due_sessions(engine, 1)
    rounds, exactly_one, total = contended(url, engine, claims // PROCESSES, PROCESSES)
    verdicts = (
        targets.at_most("rounds without exactly one winner", rounds - exactly_one, 0),
        targets.at_most("duplicate winners", total - rounds, 0),
    )
    return (
        "contended claims (8 processes, one session)",
        f"{rounds * PROCESSES:,} claim attempts in {rounds:,} rounds",
        f"{rounds - exactly_one} rounds without exactly one winner; "
        f"{total - rounds} duplicate winners",
        all_met(verdicts),
    )


def duplicate_delivery(engine: Engine, trials: int, targets: Targets) -> tuple[str, ...]:
    repository = ProgramSessionRepository(engine)
    registrar = EmbeddedRegistrar(engine)
    reset_due_sessions(engine, trials)  # `trials` due SCHEDULED sessions, ids 1..trials
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jlg_local_registration (program_id, user_id)"
                " SELECT 1, g FROM generate_series(1, 20) AS g ON CONFLICT DO NOTHING"
            )
        )
    triggers = [Trigger.EVENT, Trigger.EVENT, Trigger.CRON, Trigger.BACKFILL]
    with ThreadPoolExecutor(len(triggers)) as pool:
        for sid in range(1, trials + 1):
            list(
                pool.map(
                    lambda t, sid=sid: generate_for_session(
                        BulkRegisterRequest.parse(sid),
                        repository=repository,
                        registrar=registrar,
                        trigger=t,
                    ),
                    triggers,
                )
            )
    with engine.connect() as conn:
        per_session = conn.execute(
            select(local_bulk_job.c.program_session_id, func.count()).group_by(
                local_bulk_job.c.program_session_id
            )
        ).all()
    once = sum(1 for _, n in per_session if n == 1)
    return (
        "duplicate delivery (4 triggers per session at once)",
        f"{trials} trials",
        f"{once} sessions generated exactly once; {trials - once} otherwise",
        targets.at_most("sessions not generated exactly once", trials - once, 0),
    )


def malformed_bodies(count: int, targets: Targets) -> tuple[str, ...]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")
    json_values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=12,
    )
    almost_valid = st.fixed_dictionaries(
        {
            "queueType": st.sampled_from(["EVENT", "event", "COMMAND", ""]),
            "subType": st.sampled_from(["JOIN_LINK_GENERATION", "OTHER", ""]),
            "data": json_values,
        },
    )
    bodies = st.one_of(
        st.text(min_size=1, max_size=200),
        json_values.map(json.dumps),
        almost_valid.map(json.dumps),
    )
    sent = crashes = runs = 0
    logging.getLogger("jlg_pipeline.services.event_intake").setLevel(logging.ERROR)  # 1 line each
    with mock_aws():
        sqs = boto3.client("sqs")
        url = sqs.create_queue(QueueName="bench-malformed")["QueueUrl"]
        queue = SqsQueue(sqs, url)

        @settings(
            max_examples=count,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(body=bodies)
        def feed(body: str) -> None:
            nonlocal sent, crashes, runs
            if not body.strip():
                body = " "
            sqs.send_message(QueueUrl=url, MessageBody=body)
            sent += 1
            try:
                accepted = drain(queue, runs_exist=lambda _: set()).accepted
                runs += len(accepted)
                # What the next tick does once their runs exist.
                acknowledge(queue, [a.message for a in accepted], set)
            except Exception:  # noqa: BLE001 - counting crashes is the point
                crashes += 1

        feed()
        left = int(
            sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]["ApproximateNumberOfMessages"]
        )
    return (
        "malformed SQS bodies through the sensor's intake",
        f"{sent:,} bodies",
        f"{crashes} crashes; {runs} valid by chance (runs requested); {left} left on the queue",
        all_met(
            (
                targets.at_most("intake crashes on malformed bodies", crashes, 0),
                targets.at_most("malformed bodies left on the queue", left, 0),
            )
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--duplicates", type=int, default=100)
    parser.add_argument("--bodies", type=int, default=1_000)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    rows: list[tuple[str, ...]] = []
    with bench_database("jlg_bench_reliability") as url:
        engine = create_engine(url, pool_size=8, max_overflow=4)
        rows.append(contended_claims(url, engine, args.claims, targets))
        rows.append(duplicate_delivery(engine, args.duplicates, targets))
        engine.dispose()
    rows.append(malformed_bodies(args.bodies, targets))
    table(
        f"Reliability ({machine()}); targets: none lost, none doubled, no crash",
        rows,
        ("scenario", "tried", "outcome", ""),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
