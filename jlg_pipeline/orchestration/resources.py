"""The Dagster resources: each hands a run (or a sensor tick) the plain adapter that
``jlg_pipeline.bootstrap`` assembles from the code location's Settings, and closes it after.

None of them has a config field. Dagster takes resource config as run config, and its UI
(no login) lets anyone type run config into the Launchpad: a field naming a URL, endpoint,
ARN, token, database or registrar kind would let them redirect our calls and our secrets
(``EnvVar`` values included, which are only defaults). With an empty schema Dagster's own
config check refuses a run config that sets anything here, before any step runs. What an
operator may set per run (a session, a batch limit) is op config."""

from collections.abc import Iterator
from dataclasses import dataclass

from dagster import InitResourceContext, ResourceDefinition, resource
from sqlalchemy import Engine

from jlg_pipeline import bootstrap
from jlg_pipeline.adapters.candidates import Candidates
from jlg_pipeline.adapters.queue import SessionQueue
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.service_view import NO_BUDGET, ServiceView
from jlg_pipeline.adapters.sqs_queue import DEFAULT_VISIBILITY_TIMEOUT_S, SqsQueue
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.constants import ONLINE_SESSION_TIMEOUT_S, TimingWindows
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.schedule_sync import SyncReport
from jlg_pipeline.domain.service_view import Budget
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.services.why import Why

NO_CONFIG: dict[str, object] = {}
"""Every resource's config schema: nothing may be set from run config."""


@dataclass(frozen=True)
class RunDatabase:
    """The application database for one run or tick, and the generation core's knobs."""

    engine: Engine
    windows: TimingWindows
    concurrency: int
    """Sessions a run of several generates at once (JLG_GENERATION_CONCURRENCY): the
    bulkRegister calls one run opens at once."""
    budget: Budget = NO_BUDGET
    """The online-session service's rate budget (JLG_ONLINE_SESSION_RATE, _BURST)."""
    call_bound_s: float = ONLINE_SESSION_TIMEOUT_S
    scheduler_enabled: bool = False
    """ENABLE_JOIN_LINK_SCHEDULER, as Settings read it when the code location loaded."""
    sweep_enabled: bool = False
    """ENABLE_JOIN_LINK_FALLBACK_CRON, likewise."""

    def repository(self) -> ProgramSessionRepository:
        return bootstrap.build_repository(self.engine, self.windows)

    def candidates(self) -> Candidates:
        """The sets the sweep and a backfill take."""
        return Candidates(self.engine, self.windows)

    def queue(self) -> SessionQueue:
        """What the paths add to the one queue: request options, the programmes' turns."""
        return SessionQueue(self.engine, self.windows)

    def view(self) -> ServiceView:
        """The online-session service as every caller sees it."""
        return ServiceView(self.engine, self.budget, self.call_bound_s)

    def why(self, session_id: SessionId) -> Why:
        """Why ``session_id`` waits (``services/why.py``)."""
        return bootstrap.build_why(
            self.engine,
            self.windows,
            self.view(),
            call_bound_s=self.call_bound_s,
            scheduler_enabled=self.scheduler_enabled,
            sweep_enabled=self.sweep_enabled,
        )(session_id)


def database_resource(settings: Settings) -> ResourceDefinition:
    @resource(config_schema=NO_CONFIG, description="The application database (JLG_DATABASE_URL).")
    def database(_: InitResourceContext) -> Iterator[RunDatabase]:
        # Each session at work may hold two connections (its registrar's and its lease
        # renewal's); the pool opens them only when they are needed.
        engine = bootstrap.build_engine(
            settings.database_url,
            pool_size=2,
            max_overflow=2 * settings.generation_concurrency + 2,
        )
        try:
            yield RunDatabase(
                engine,
                settings.windows,
                settings.generation_concurrency,
                settings.online_session_budget(),
                settings.online_session_timeout_s,
                settings.scheduler_enabled,
                settings.fallback_cron_enabled,
            )
        finally:
            engine.dispose()

    return database


def registrar_resource(settings: Settings) -> ResourceDefinition:
    @resource(
        config_schema=NO_CONFIG,
        required_resource_keys={"database"},
        description=f"bulkRegister through the {settings.registrar.value} registrar "
        "(JLG_REGISTRAR).",
    )
    def registrar(context: InitResourceContext) -> Iterator[BulkRegistrar]:
        database: RunDatabase = context.resources.database
        with bootstrap.build_registrar(
            settings.registrar,
            database.engine,
            url=settings.online_session_url,
            token=settings.online_session_token,
            timeout_s=settings.online_session_timeout_s,
        ) as built:
            yield built

    return registrar


class ScheduleSyncer:
    """Applies pending schedule changes to EventBridge Scheduler (Create/Update/DeleteSchedule
    only); whether the scheduler is on is read when the run calls it."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self._settings = settings
        self._engine = engine

    def sync(self, limit: int) -> SyncReport:
        settings = self._settings
        schedule_sync = bootstrap.build_schedule_sync(
            self._engine,
            bootstrap.build_scheduler(settings.aws_region, settings.aws_endpoint_url),
            settings.scheduler_target,
            enabled=settings.scheduler_enabled,
        )
        return schedule_sync.sync(limit)


def schedule_sync_resource(settings: Settings) -> ResourceDefinition:
    @resource(
        config_schema=NO_CONFIG,
        required_resource_keys={"database"},
        description="EventBridge Scheduler, for the schedule changes the outbox holds.",
    )
    def schedule_sync(context: InitResourceContext) -> ScheduleSyncer:
        return ScheduleSyncer(settings, context.resources.database.engine)

    return schedule_sync


@dataclass(frozen=True)
class QueueIntake:
    """The JOIN_LINK_GENERATION queue as the SQS sensor polls it. ``queue_url`` is None in a
    deployment without one (the real-time path off); the sensor then says so if turned on."""

    queue_url: str | None
    wait_seconds: int
    """How long a tick's first receive waits for a message to arrive (SQS long polling)."""
    visibility_timeout_seconds: int
    """How long a received message stays hidden: a tick that is lost gives its messages back
    after this long. Longer than a tick and the next one, which acknowledges them."""
    aws_region: str | None
    aws_endpoint_url: str | None

    def queue(self) -> SqsQueue:
        if not self.queue_url:
            raise ConfigError("JLG_SQS_QUEUE_URL is not set; the SQS sensor cannot poll")
        return bootstrap.build_queue(
            self.queue_url, self.visibility_timeout_seconds, self.aws_region, self.aws_endpoint_url
        )


def sqs_queue_resource(
    settings: Settings, visibility_timeout_seconds: int = DEFAULT_VISIBILITY_TIMEOUT_S
) -> ResourceDefinition:
    intake = QueueIntake(
        queue_url=settings.sqs_queue_url,
        wait_seconds=settings.sqs_wait_s,
        visibility_timeout_seconds=visibility_timeout_seconds,
        aws_region=settings.aws_region,
        aws_endpoint_url=settings.aws_endpoint_url,
    )

    @resource(config_schema=NO_CONFIG, description="The queue (JLG_SQS_QUEUE_URL).")
    def sqs_queue(_: InitResourceContext) -> QueueIntake:
        return intake

    return sqs_queue


def build_resources(settings: Settings) -> dict[str, ResourceDefinition]:
    """The resources for this deployment, every one from ``settings``."""
    return {
        "database": database_resource(settings),
        "registrar": registrar_resource(settings),
        "schedule_sync": schedule_sync_resource(settings),
        "sqs_queue": sqs_queue_resource(settings),
    }
