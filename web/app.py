"""The composition root of the front door: ``uvicorn --factory web.app:create_app``.

Settings are read when the factory runs; nothing connects at import. The engine and the
AWS client are made in the lifespan and disposed after.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

from jlg_pipeline.adapters.aws_scheduler import AwsScheduler, scheduler_client
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import JlgError
from jlg_pipeline.log import configure_logging
from jlg_pipeline.services.join_link_scheduler import JoinLinkScheduler
from jlg_pipeline.services.program_session import ProgramSessionService
from web import envelope, routes
from web.auth import JwtBackend, on_auth_error
from web.metrics import Metrics, MetricsMiddleware
from web.openapi import build_openapi

logger = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, scheduler_client_: Any = None) -> Starlette:
    """Build the app. ``scheduler_client_`` replaces the boto3 scheduler client (tests)."""
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
        engine = create_engine(settings.database_url)
        repository = ProgramSessionRepository(engine, settings.windows)
        client = scheduler_client_
        if client is None and settings.scheduler_enabled and settings.scheduler_target:
            client = scheduler_client(
                region_name=settings.aws_region, endpoint_url=settings.aws_endpoint_url
            )
        scheduler = JoinLinkScheduler(
            AwsScheduler(client) if client is not None else None,
            enabled=settings.scheduler_enabled,
            target=settings.scheduler_target,
        )
        app.state.engine = engine
        app.state.sessions = ProgramSessionService(repository, scheduler)
        metrics.watch_sessions(repository.count_by_status)
        try:
            yield
        finally:
            engine.dispose()

    auth = [Middleware(AuthenticationMiddleware, backend=backend, on_error=on_auth_error)]
    app = Starlette(
        routes=[
            Route(
                "/program-session/{id}/link-generation",
                routes.link_generation,
                methods=["GET", "PATCH"],
                middleware=auth,
                name="link_generation",
            ),
            Route("/healthz", routes.healthz, methods=["GET"]),
            Route("/readyz", routes.readyz, methods=["GET"]),
            Route("/metrics", routes.metrics, methods=["GET"]),
            Route("/openapi.json", routes.openapi, methods=["GET"]),
        ],
        middleware=[Middleware(MetricsMiddleware, metrics=metrics)],
        exception_handlers={
            HTTPException: envelope.http_exception,
            JlgError: envelope.jlg_error,
            Exception: envelope.unexpected,
        },
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    app.state.openapi = build_openapi()
    return app
