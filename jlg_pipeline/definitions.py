"""The Dagster code location: ``defs``, the composition root of the Dagster entry point.
Loaded by ``workspace.yaml`` (or served by ``dagster api grpc -m jlg_pipeline.definitions``).
It reads the environment once, into Settings, and configures the resources from them:
secrets reach the resources as ``EnvVar`` (resolved in the run, never shown in the UI).
Nothing connects here."""

import os
import warnings
from collections.abc import Mapping
from typing import Any

from dagster import BetaWarning, Definitions, EnvVar

from jlg_pipeline.config import RegistrarKind, Settings
from jlg_pipeline.orchestration.eventbridge_sync import (
    build_schedule_sync_sensor,
    join_link_schedule_sync_job,
)
from jlg_pipeline.orchestration.fallback import (
    join_link_backfill_job,
    join_link_fallback_schedule,
    join_link_fallback_sweep_job,
)
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.prune import build_prune_schedule, join_link_dagster_prune_job
from jlg_pipeline.orchestration.resources import (
    DatabaseResource,
    RegistrarResource,
    ScheduleSyncResource,
    SqsQueueResource,
)
from jlg_pipeline.orchestration.sqs_events import build_sqs_sensor
from jlg_pipeline.orchestration.watchdog import build_watchdog_sensor

# Dagster 1.13 copies a sensor that targets several jobs (the schedule sync sensor) with
# owners=[] and then warns that `owners` is beta, though none is set: noise in every log.
warnings.filterwarnings(
    "ignore",
    message="Parameter `owners` of initializer `SensorDefinition.__init__`",
    category=BetaWarning,
)


def build_resources(settings: Settings) -> dict[str, Any]:
    """The resources for this deployment, from its settings: the registrar ``JLG_REGISTRAR``
    names, the queue if ``JLG_SQS_QUEUE_URL`` is set."""
    database = DatabaseResource(
        url=EnvVar("JLG_DATABASE_URL"),
        grace_ms=settings.windows.grace_ms,
        stale_ms=settings.windows.stale_ms,
        watchdog_grace_ms=settings.windows.watchdog_grace_ms,
        concurrency=settings.generation_concurrency,
    )
    http = settings.registrar is RegistrarKind.HTTP
    target = settings.scheduler_target
    return {
        "database": database,
        "registrar": RegistrarResource(
            database=database,
            kind=settings.registrar.value,
            url=EnvVar("JLG_ONLINE_SESSION_URL") if http else None,
            token=EnvVar("JLG_ONLINE_SESSION_TOKEN") if http else None,
            timeout_s=settings.online_session_timeout_s,
        ),
        "schedule_sync": ScheduleSyncResource(
            database=database,
            queue_arn=target.queue_arn if target else None,
            role_arn=target.role_arn if target else None,
            group_name=target.group_name if target else None,
            aws_region=settings.aws_region,
            aws_endpoint_url=settings.aws_endpoint_url,
        ),
        "sqs_queue": SqsQueueResource(
            queue_url=EnvVar("JLG_SQS_QUEUE_URL") if settings.sqs_queue_url else None,
            wait_seconds=settings.sqs_wait_s,
            aws_region=settings.aws_region,
            aws_endpoint_url=settings.aws_endpoint_url,
        ),
    }


def build_definitions(environ: Mapping[str, str]) -> Definitions:
    """The code location from ``environ``; raises ConfigError for a configuration that cannot
    work (the code location then fails to load, saying which variable)."""
    settings = Settings.from_env(environ)
    per_run = settings.max_sessions_per_run
    generation_job = build_generation_job()
    shared_job = build_shared_generation_job()
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
            build_sqs_sensor(settings.sqs_sensor_interval_s, per_run),
            build_schedule_sync_sensor(generation_job if per_run == 1 else shared_job, per_run),
            build_watchdog_sensor(shared_job),
        ],
        schedules=[
            join_link_fallback_schedule,
            build_prune_schedule(settings.dagster_retention_days),
        ],
        resources=build_resources(settings),
    )


defs = build_definitions(os.environ)
