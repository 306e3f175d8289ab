"""The composition root of the front door: ``uvicorn --factory web.app:create_app``.

Settings are read when the factory runs; nothing connects at import. The engine and the
AWS client are made in the lifespan and disposed after.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

from jlg_pipeline import bootstrap
from jlg_pipeline.adapters.database import REQUEST_BOUNDS, ping
from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
from jlg_pipeline.adapters.orchestrator_health import read_orchestrator_health, storage_engine
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import JlgError
from jlg_pipeline.log import configure_logging
from jlg_pipeline.services.schedule_sync import Scheduler
from web import envelope
from web.auth import JwtBackend, on_auth_error
from web.endpoints import ENDPOINTS, INTERNAL
from web.limits import HeaderCountLimit
from web.metrics import Metrics, MetricsMiddleware, Reading, database_figures, orchestrator_figures
from web.openapi import build_openapi
from web.readiness import Readiness
from web.schedule_fast_path import FAST_PATH_WORKERS, ScheduleFastPath

logger = logging.getLogger(__name__)
POOL_TIMEOUT_S = 5.0
"""How long a request waits for a pooled connection before it answers 503."""


def create_app(
    settings: Settings | None = None, *, scheduler: Scheduler | None = None
) -> Starlette:
    """Build the app from ``settings`` (read from the environment by default). ``scheduler``
    replaces the EventBridge adapter the settings would build (any ``Scheduler``)."""
    configure_logging()
    settings = settings or Settings.from_env()
    settings.require_jwt_key()
    backend = JwtBackend(
        secret=settings.jwt_secret,
        public_key=settings.jwt_public_key,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        max_ttl_s=settings.jwt_max_ttl_s,
    )
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = bootstrap.build_engine(
            settings.database_url, pool_timeout_s=POOL_TIMEOUT_S, bounds=REQUEST_BOUNDS
        )
        # The fast path's own pool: it never takes a connection a request is waiting for.
        sync_engine = bootstrap.build_engine(
            settings.database_url,
            pool_size=FAST_PATH_WORKERS,
            max_overflow=0,
            pool_timeout_s=POOL_TIMEOUT_S,
            bounds=REQUEST_BOUNDS,
        )
        sessions = bootstrap.build_program_session_service(
            settings,
            engine,
            scheduler if scheduler is not None else bootstrap.scheduler_for(settings),
            sync_engine=sync_engine,
        )
        fast_path = ScheduleFastPath()
        app.state.engine = engine
        app.state.readiness = Readiness(partial(ping, settings.database_url))
        app.state.sessions = sessions
        app.state.why = bootstrap.why_for(settings, engine)
        app.state.programmes = bootstrap.build_programme_actions(settings, engine, sessions)
        app.state.fast_path = fast_path
        readings: list[Reading[Any]] = [
            Reading(
                "database",
                partial(
                    read_metrics_snapshot,
                    engine,
                    settings.online_session_budget(),
                    settings.windows,
                ),
                database_figures,
            )
        ]
        dagster_engine = None
        if settings.dagster_reader_url:
            dagster_engine = storage_engine(
                settings.dagster_reader_url, pool_size=1, max_overflow=0, bounds=REQUEST_BOUNDS
            )
            readings.append(
                Reading(
                    "dagster",
                    partial(read_orchestrator_health, dagster_engine),
                    orchestrator_figures,
                )
            )
        figures = metrics.watch(readings)
        app.state.figures = figures
        try:
            yield
        finally:
            fast_path.shutdown()
            figures.stop()
            engine.dispose()
            sync_engine.dispose()
            if dagster_engine is not None:
                dagster_engine.dispose()

    auth = [Middleware(AuthenticationMiddleware, backend=backend, on_error=on_auth_error)]
    app = Starlette(
        routes=[
            Route(
                e.path,
                e.handler,
                methods=list(e.methods),
                middleware=auth if e.admin else None,
                name=e.path,
            )
            for e in (*ENDPOINTS, *INTERNAL)
        ],
        middleware=[
            Middleware(MetricsMiddleware, metrics=metrics),
            Middleware(HeaderCountLimit),
        ],
        exception_handlers={
            HTTPException: envelope.http_exception,
            JlgError: envelope.jlg_error,
            Exception: envelope.unexpected,
        },
        lifespan=lifespan,
    )
    # A trailing slash is a route that does not exist, not a redirect to whatever Host said.
    app.router.redirect_slashes = False
    app.state.metrics = metrics
    app.state.openapi = build_openapi()
    return app
