"""The front door's baseline: a bare Starlette endpoint doing the same single UPDATE, with no
auth, validation envelope, metrics or scheduler. Served by ``bench.timing.front_door``."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from jlg_pipeline.adapters.database import create_engine

UPDATE = text(
    "UPDATE hdb_program_session SET link_generation_at = :at,"
    " link_generation_status = 'SCHEDULED', updated_at = now()"
    " WHERE id = :id RETURNING id, link_generation_at, link_generation_status"
)


def create_bare_app() -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.engine = create_engine(os.environ["JLG_DATABASE_URL"])
        yield
        app.state.engine.dispose()

    async def patch(request: Request) -> JSONResponse:
        body = await request.json()
        at = datetime.fromisoformat(body["linkGenerationAt"])
        session_id = int(request.path_params["id"])

        def write() -> dict[str, object]:
            with request.app.state.engine.begin() as conn:
                row = conn.execute(UPDATE, {"at": at, "id": session_id}).one()
            return {
                "id": row.id,
                "linkGenerationAt": row.link_generation_at.isoformat(),
                "linkGenerationStatus": row.link_generation_status,
            }

        return JSONResponse(await run_in_threadpool(write))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/program-session/{id}/link-generation", patch, methods=["PATCH"]),
            # What the launcher waits for (testkit/served.py), as for the app.
            Route("/healthz", healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
