"""Thin Dagster resources, every one a ``ConfigurableResource``, handing out the plain
adapters that ``jlg_pipeline.bootstrap`` assembles (the same functions the web app and the CLI
use). They read nothing from the environment themselves: ``definitions.py`` configures them
from the code location's Settings, secrets as ``EnvVar`` (resolved in the run, never shown in
the UI)."""

from contextlib import ExitStack

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr
from sqlalchemy import Engine

from jlg_pipeline import bootstrap
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.registrars.http import DEFAULT_TIMEOUT_S
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.sqs_queue import DEFAULT_VISIBILITY_TIMEOUT_S, SqsQueue
from jlg_pipeline.config import Flags, RegistrarKind
from jlg_pipeline.domain.constants import (
    GENERATION_CONCURRENCY,
    GRACE_MS,
    STALE_MS,
    WATCHDOG_GRACE_MS,
    TimingWindows,
)
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.eventbridge_sync import SyncReport
from jlg_pipeline.domain.models import BulkRegisterRequest, BulkRegisterResult


class DatabaseResource(ConfigurableResource):  # type: ignore[type-arg]
    """The application database and the generation core's knobs; one small pool per run,
    closed when the run ends."""

    url: str
    grace_ms: int = GRACE_MS
    stale_ms: int = STALE_MS
    watchdog_grace_ms: int = WATCHDOG_GRACE_MS
    concurrency: int = GENERATION_CONCURRENCY
    """Sessions a run of several generates at once (JLG_GENERATION_CONCURRENCY): the
    bulkRegister calls one run opens at once."""

    _engine: Engine | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # Each session at work may hold two connections (its registrar's and its lease
        # renewal's); the pool opens them only when they are needed.
        self._engine = bootstrap.build_engine(
            self.url, pool_size=2, max_overflow=2 * self.concurrency + 2
        )

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def engine(self) -> Engine:
        if self._engine is None:
            raise ConfigError("the database resource is used outside a run")
        return self._engine

    def repository(self) -> ProgramSessionRepository:
        windows = TimingWindows(
            grace_ms=self.grace_ms,
            stale_ms=self.stale_ms,
            watchdog_grace_ms=self.watchdog_grace_ms,
        )
        return bootstrap.build_repository(self.engine(), windows)


class RegistrarResource(ConfigurableResource):  # type: ignore[type-arg]
    """bulkRegister as ``JLG_REGISTRAR`` says: the embedded registrar (in the application
    database) or the online-session service over HTTP, its client closed when the run ends.
    The resource is itself a ``BulkRegistrar``: ops take any one."""

    database: DatabaseResource
    kind: str = RegistrarKind.LOCAL.value
    url: str | None = None
    token: str | None = None
    """JLG_ONLINE_SESSION_TOKEN, given as an EnvVar."""
    timeout_s: float = DEFAULT_TIMEOUT_S

    _registrar: BulkRegistrar | None = PrivateAttr(default=None)
    _closing: ExitStack = PrivateAttr(default_factory=ExitStack)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._registrar = self._closing.enter_context(
            bootstrap.build_registrar(
                RegistrarKind(self.kind),
                self.database.engine(),
                url=self.url,
                token=self.token,
                timeout_s=self.timeout_s,
            )
        )

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self._closing.close()
        self._registrar = None

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        if self._registrar is None:
            raise ConfigError("the registrar resource is used outside a run")
        return self._registrar.bulk_register(request)


class ScheduleSyncResource(ConfigurableResource):  # type: ignore[type-arg]
    """Applies pending schedule changes to EventBridge Scheduler (Create/Update/DeleteSchedule
    only); whether the scheduler is on is read when the run starts."""

    database: DatabaseResource
    queue_arn: str | None = None
    role_arn: str | None = None
    group_name: str | None = None
    aws_region: str | None = None
    aws_endpoint_url: str | None = None

    def sync(self, limit: int) -> SyncReport:
        """``ScheduleSync.sync`` with the adapters ``bootstrap`` assembles."""
        schedule_sync = bootstrap.build_schedule_sync(
            self.database.engine(),
            bootstrap.build_scheduler(self.aws_region, self.aws_endpoint_url),
            ScheduleTarget.of(self.queue_arn, self.role_arn, self.group_name),
            enabled=Flags.read().scheduler_enabled,
        )
        return schedule_sync.sync(limit)


class SqsQueueResource(ConfigurableResource):  # type: ignore[type-arg]
    """The JOIN_LINK_GENERATION queue. ``queue_url`` is None in a deployment without one
    (the real-time path off); the sensor then says so if it is turned on."""

    queue_url: str | None = None
    visibility_timeout_seconds: int = DEFAULT_VISIBILITY_TIMEOUT_S
    """How long a received message stays hidden: a tick that is lost gives its messages back
    after this long. Longer than a tick and the next one, which acknowledges them."""
    wait_seconds: int = 0
    """How long a tick's first receive waits for a message to arrive (SQS long polling)."""
    aws_region: str | None = None
    aws_endpoint_url: str | None = None

    def queue(self) -> SqsQueue:
        if not self.queue_url:
            raise ConfigError("JLG_SQS_QUEUE_URL is not set; the SQS sensor cannot poll")
        return bootstrap.build_queue(
            self.queue_url, self.visibility_timeout_seconds, self.aws_region, self.aws_endpoint_url
        )
