"""Thin ConfigurableResources handing out the plain adapters; nothing connects at import."""

import os
from functools import lru_cache

from dagster import ConfigurableResource
from sqlalchemy import Engine

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.sqs_queue import DEFAULT_VISIBILITY_TIMEOUT_S, SqsQueue, sqs_client
from jlg_pipeline.bootstrap import build_registrar
from jlg_pipeline.config import Settings, timing_windows
from jlg_pipeline.domain.errors import ConfigError

_ENGINE_URLS: set[str] = set()


@lru_cache(maxsize=4)
def _engine(url: str) -> Engine:
    # One pool per process (a run, or the code server evaluating sensor ticks).
    _ENGINE_URLS.add(url)
    return create_engine(url, pool_size=2, max_overflow=2)


def dispose_engines() -> None:
    """Close every cached pool (tests; a run's process otherwise closes them on exit)."""
    for url in list(_ENGINE_URLS):
        _engine(url).dispose()
    _ENGINE_URLS.clear()
    _engine.cache_clear()


class DatabaseResource(ConfigurableResource):  # type: ignore[type-arg]
    """The application database (``JLG_DATABASE_URL``)."""

    url: str

    def engine(self) -> Engine:
        return _engine(self.url)

    def repository(self) -> ProgramSessionRepository:
        return ProgramSessionRepository(self.engine(), timing_windows())


class RegistrarResource(ConfigurableResource):  # type: ignore[type-arg]
    """bulkRegister as ``JLG_REGISTRAR`` selects (``local`` by default, or ``http`` with
    ``JLG_ONLINE_SESSION_URL`` and ``JLG_ONLINE_SESSION_TOKEN``), read when a run uses it."""

    def registrar(self, database: DatabaseResource) -> BulkRegistrar:
        return build_registrar(Settings.from_env(), database.engine())


class SqsQueueResource(ConfigurableResource):  # type: ignore[type-arg]
    """The JOIN_LINK_GENERATION queue. ``queue_url`` defaults to ``JLG_SQS_QUEUE_URL``, read
    when the sensor needs it, so a deployment with the real-time path off needs no queue."""

    queue_url: str | None = None
    visibility_timeout_seconds: int = DEFAULT_VISIBILITY_TIMEOUT_S
    """How long a received message stays hidden: a tick that is lost gives its messages back
    after this long. Longer than a tick and the next one, which acknowledges them."""
    wait_seconds: int = 0
    """How long a tick's first receive waits for a message to arrive (SQS long polling)."""

    def queue(self) -> SqsQueue:
        url = self.queue_url or os.environ.get("JLG_SQS_QUEUE_URL")
        if not url:
            raise ConfigError("JLG_SQS_QUEUE_URL is not set; the SQS sensor cannot poll")
        # Region and endpoint come from the standard AWS_* variables, as boto3 reads them.
        return SqsQueue(sqs_client(), url, visibility_timeout=self.visibility_timeout_seconds)
