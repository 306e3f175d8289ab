"""The Dagster code location: ``defs``, the composition root of the Dagster entry point.
Loaded by ``workspace.yaml``. It reads the environment once, to pick the registrar and the
tuning knobs; secrets reach the resources as ``EnvVar`` (resolved in the run, never shown in
the UI). Nothing connects here."""

import os
import warnings
from collections.abc import Mapping
from typing import Any

from dagster import BetaWarning, Definitions, EnvVar

from jlg_pipeline.config import RegistrarKind, Settings, sqs_sensor_interval_s, sqs_wait_s
from jlg_pipeline.domain.schedule import DEFAULT_GROUP
from jlg_pipeline.orchestration.jobs import (
    build_generation_job,
    build_shared_generation_job,
    join_link_backfill_job,
    join_link_fallback_sweep_job,
)
from jlg_pipeline.orchestration.prune import (
    join_link_dagster_prune_job,
    join_link_dagster_prune_schedule,
)
from jlg_pipeline.orchestration.resources import (
    DatabaseResource,
    SqsQueueResource,
    http_registrar,
    local_registrar,
)
from jlg_pipeline.orchestration.schedule_sync import (
    build_schedule_sync_sensor,
    join_link_schedule_sync_job,
    schedule_sync,
)
from jlg_pipeline.orchestration.schedules import join_link_fallback_schedule
from jlg_pipeline.orchestration.sensors import build_sqs_sensor
from jlg_pipeline.orchestration.watchdog import build_watchdog_sensor

# Dagster 1.13 copies a sensor that targets several jobs (the schedule sync sensor) with
# owners=[] and then warns that `owners` is beta, though none is set: noise in every log.
warnings.filterwarnings(
    "ignore",
    message="Parameter `owners` of initializer `SensorDefinition.__init__`",
    category=BetaWarning,
)


def build_resources(environ: Mapping[str, str], settings: Settings | None = None) -> dict[str, Any]:
    """The resources for this deployment: the registrar ``JLG_REGISTRAR`` names, the queue
    if ``JLG_SQS_QUEUE_URL`` is set. Raises ConfigError for a configuration that cannot work."""
    settings = settings or Settings.from_env(environ)
    database = DatabaseResource(
        url=EnvVar("JLG_DATABASE_URL"),
        grace_ms=settings.windows.grace_ms,
        stale_ms=settings.windows.stale_ms,
        watchdog_grace_ms=settings.windows.watchdog_grace_ms,
        concurrency=settings.generation_concurrency,
    )
    registrar = (
        http_registrar.configured(
            {
                "url": {"env": "JLG_ONLINE_SESSION_URL"},
                "token": {"env": "JLG_ONLINE_SESSION_TOKEN"},
                "timeout_s": settings.online_session_timeout_s,
            }
        )
        if settings.registrar is RegistrarKind.HTTP
        else local_registrar
    )
    queue_url = EnvVar("JLG_SQS_QUEUE_URL") if environ.get("JLG_SQS_QUEUE_URL") else None
    target = settings.scheduler_target
    return {
        "database": database,
        "registrar": registrar,
        "schedule_sync": schedule_sync.configured(
            {
                "queue_arn": settings.queue_arn,
                "role_arn": settings.role_arn,
                "group_name": target.group_name if target else DEFAULT_GROUP,
            }
        ),
        "sqs_queue": SqsQueueResource(queue_url=queue_url, wait_seconds=sqs_wait_s(environ)),
    }


def build_definitions(environ: Mapping[str, str]) -> Definitions:
    generation_job = build_generation_job()
    shared_job = build_shared_generation_job()
    settings = Settings.from_env(environ)
    per_run = settings.max_sessions_per_run
    return Definitions(
        jobs=[
            generation_job,
            shared_job,
            join_link_fallback_sweep_job,
            join_link_backfill_job,
            join_link_schedule_sync_job,
            join_link_dagster_prune_job,
        ],
        sensors=[
            build_sqs_sensor(sqs_sensor_interval_s(environ), per_run),
            build_schedule_sync_sensor(generation_job if per_run == 1 else shared_job, per_run),
            build_watchdog_sensor(shared_job),
        ],
        schedules=[join_link_fallback_schedule, join_link_dagster_prune_schedule],
        resources=build_resources(environ, settings),
    )


defs = build_definitions(os.environ)
