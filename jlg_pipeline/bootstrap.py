"""Builds the adapters and services from settings: the one place an entry point gets them
from (the web app's lifespan; the Dagster resources configure the same adapters in
``definitions.py``). Nothing connects at import."""

from typing import Any

from sqlalchemy import Engine

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.config import Settings
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.schedule_sync import Scheduler, ScheduleSync


def build_engine(settings: Settings, **pool: Any) -> Engine:
    """The application database's engine; ``pool`` sizes its pool (``create_engine``)."""
    return create_engine(settings.database_url, **pool)


def build_scheduler(settings: Settings) -> Scheduler | None:
    """The EventBridge Scheduler adapter, or None when the real-time path is off or its ARNs
    are missing (schedule sync then records nothing)."""
    if not (settings.scheduler_enabled and settings.scheduler_target):
        return None
    # Imported here: boto3 loads only when a client is made.
    from jlg_pipeline.adapters.aws_scheduler import AwsScheduler, scheduler_client

    return AwsScheduler(
        scheduler_client(region_name=settings.aws_region, endpoint_url=settings.aws_endpoint_url)
    )


def build_program_session_service(
    settings: Settings,
    engine: Engine,
    scheduler: Scheduler | None,
    *,
    sync_engine: Engine | None = None,
) -> ProgramSessionService:
    """Set/clear on ``engine``; the schedule change's fast path on ``sync_engine`` (the same
    engine by default; the web app gives it a pool of its own)."""
    repository = ProgramSessionRepository(engine, settings.windows)
    return ProgramSessionService(
        repository, build_schedule_sync(settings, sync_engine or engine, scheduler)
    )


def build_schedule_sync(
    settings: Settings, engine: Engine, scheduler: Scheduler | None
) -> ScheduleSync:
    return ScheduleSync(
        ScheduleOutbox(engine),
        scheduler,
        settings.scheduler_target,
        enabled=settings.scheduler_enabled,
    )


def resync_schedules(settings: Settings) -> int:
    """``jlg schedules resync``: mark every armed, not-yet-due session pending. It only marks:
    the sync job applies them, with its backoff and error keeping."""
    engine = build_engine(settings)
    try:
        return build_schedule_sync(settings, engine, None).resync()
    finally:
        engine.dispose()
