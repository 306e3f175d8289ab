"""Thin Dagster resources handing out the plain adapters. They read nothing from the
environment themselves: ``definitions.py`` configures them (secrets through ``EnvVar``, so
the UI never shows them) and picks the registrar implementation per deployment."""

from collections.abc import Iterator

from dagster import ConfigurableResource, Field, InitResourceContext, StringSource, resource
from pydantic import PrivateAttr
from sqlalchemy import Engine

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.registrars.http import DEFAULT_TIMEOUT_S
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.sqs_queue import DEFAULT_VISIBILITY_TIMEOUT_S, SqsQueue, sqs_client
from jlg_pipeline.domain.constants import (
    GENERATION_CONCURRENCY,
    GRACE_MS,
    STALE_MS,
    WATCHDOG_GRACE_MS,
    TimingWindows,
)
from jlg_pipeline.domain.errors import ConfigError


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
        self._engine = create_engine(self.url, pool_size=2, max_overflow=2 * self.concurrency + 2)

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
        return ProgramSessionRepository(self.engine(), windows)


@resource(
    required_resource_keys={"database"},
    description="bulkRegister by the embedded registrar, in the application database.",
)
def local_registrar(context: InitResourceContext) -> BulkRegistrar:
    # Imported here: a deployment on the HTTP registrar never loads the local one.
    from jlg_pipeline.adapters.registrars.local import LocalRegistrar

    database: DatabaseResource = context.resources.database
    return LocalRegistrar(database.engine())


@resource(
    config_schema={
        "url": Field(StringSource, description="JLG_ONLINE_SESSION_URL"),
        "token": Field(StringSource, description="JLG_ONLINE_SESSION_TOKEN; give it as {env: …}"),
        "timeout_s": Field(float, default_value=DEFAULT_TIMEOUT_S),
    },
    description="bulkRegister over HTTP against the online-session service; the client is "
    "closed when the run ends.",
)
def http_registrar(context: InitResourceContext) -> Iterator[BulkRegistrar]:
    from jlg_pipeline.adapters.registrars.http import HttpRegistrar

    config = context.resource_config
    with HttpRegistrar(config["url"], config["token"], timeout_s=config["timeout_s"]) as registrar:
        yield registrar


class SqsQueueResource(ConfigurableResource):  # type: ignore[type-arg]
    """The JOIN_LINK_GENERATION queue. ``queue_url`` is None in a deployment without one
    (the real-time path off); the sensor then says so if it is turned on."""

    queue_url: str | None = None
    visibility_timeout_seconds: int = DEFAULT_VISIBILITY_TIMEOUT_S
    """How long a received message stays hidden: a tick that is lost gives its messages back
    after this long. Longer than a tick and the next one, which acknowledges them."""
    wait_seconds: int = 0
    """How long a tick's first receive waits for a message to arrive (SQS long polling)."""

    def queue(self) -> SqsQueue:
        if not self.queue_url:
            raise ConfigError("JLG_SQS_QUEUE_URL is not set; the SQS sensor cannot poll")
        # Region and endpoint come from the standard AWS_* variables, as boto3 reads them.
        return SqsQueue(
            sqs_client(), self.queue_url, visibility_timeout=self.visibility_timeout_seconds
        )
