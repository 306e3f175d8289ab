"""The Dagster code location: ``defs``. Loaded by ``workspace.yaml``; nothing connects here."""

from dagster import Definitions, EnvVar

from jlg_pipeline.config import sqs_sensor_interval_s, sqs_wait_s
from jlg_pipeline.orchestration.jobs import (
    build_generation_job,
    join_link_backfill_job,
    join_link_fallback_sweep_job,
)
from jlg_pipeline.orchestration.resources import (
    DatabaseResource,
    RegistrarResource,
    SqsQueueResource,
)
from jlg_pipeline.orchestration.schedules import join_link_fallback_schedule
from jlg_pipeline.orchestration.sensors import build_sqs_sensor

join_link_generation_job = build_generation_job()

defs = Definitions(
    jobs=[join_link_generation_job, join_link_fallback_sweep_job, join_link_backfill_job],
    sensors=[build_sqs_sensor(join_link_generation_job.name, sqs_sensor_interval_s())],
    schedules=[join_link_fallback_schedule],
    resources={
        "database": DatabaseResource(url=EnvVar("JLG_DATABASE_URL")),
        "registrar": RegistrarResource(),
        "sqs_queue": SqsQueueResource(wait_seconds=sqs_wait_s()),
    },
)
