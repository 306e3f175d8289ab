"""The Dagster code location: ``defs``, the composition root of the Dagster entry point.
Loaded by ``workspace.yaml`` (or served by ``dagster api grpc -m jlg_pipeline.definitions``).
It reads the environment once, into Settings, and builds the resources from them: none has a
config field, so nothing typed into the Dagster UI can point them elsewhere
(``orchestration/resources.py``). Nothing connects here."""

import warnings
from collections.abc import Mapping

from dagster import BetaWarning, Definitions

from jlg_pipeline.config import Settings
from jlg_pipeline.orchestration.fallback import (
    join_link_backfill_job,
    join_link_fallback_schedule,
    join_link_fallback_sweep_job,
)
from jlg_pipeline.orchestration.generation import build_generation_job, build_shared_generation_job
from jlg_pipeline.orchestration.prune import build_prune_schedule, join_link_dagster_prune_job
from jlg_pipeline.orchestration.resources import build_resources
from jlg_pipeline.orchestration.schedule_sync import (
    build_schedule_sync_sensor,
    join_link_schedule_sync_job,
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


def build_definitions(environ: Mapping[str, str] | None = None) -> Definitions:
    """The code location from ``environ`` (this process's environment unless given); raises
    ConfigError for a configuration that cannot work (the code location then fails to load,
    saying which variable)."""
    settings = Settings.from_env(environ)
    sharing = settings.run_sharing()
    generation_job = build_generation_job()
    shared_job = build_shared_generation_job()
    generation_jobs = [generation_job, shared_job]
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
            build_sqs_sensor(settings.sqs_sensor_interval_s, sharing, generation_jobs),
            build_schedule_sync_sensor(generation_jobs, sharing),
            build_watchdog_sensor(shared_job),
        ],
        schedules=[
            join_link_fallback_schedule,
            build_prune_schedule(settings.dagster_retention_days),
        ],
        resources=build_resources(settings),
    )


defs = build_definitions()
