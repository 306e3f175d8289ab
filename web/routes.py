"""The endpoints. Each is a few lines over the services held in ``app.state``."""

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from web.auth import actor_id, admin_only
from web.envelope import success
from web.limits import read_body
from web.parsing import (
    MAX_BODY_BYTES,
    parse_idempotency_key,
    parse_listing_query,
    parse_operation_id,
    parse_program_id,
    parse_programme_body,
    parse_session_id,
    parse_set_body,
)
from web.schemas import (
    AttemptResponse,
    ChangeResponse,
    LinkGenerationReadResponse,
    LinkGenerationResponse,
    OperationRecordResponse,
    OperationResponse,
    SessionListItem,
    SessionPage,
    WhyResponse,
    body,
)


@admin_only
async def link_generation(request: Request) -> Response:
    """One route for both methods, so a wrong method's 405 names both in Allow."""
    if request.method == "PATCH":
        return await set_link_generation(request)
    return await get_link_generation(request)


@admin_only
async def link_generation_attempts(request: Request) -> Response:
    session_id = parse_session_id(request.path_params["id"])
    records = await run_in_threadpool(request.app.state.sessions.attempts, session_id)
    return success([body(AttemptResponse.of(r)) for r in records])


@admin_only
async def link_generation_why(request: Request) -> Response:
    session_id = parse_session_id(request.path_params["id"])
    answer = await run_in_threadpool(request.app.state.why, session_id)
    return success(body(WhyResponse.of(answer)))


@admin_only
async def link_generation_changes(request: Request) -> Response:
    session_id = parse_session_id(request.path_params["id"])
    changes = await run_in_threadpool(request.app.state.sessions.changes, session_id)
    return success([body(ChangeResponse.of(c)) for c in changes])


@admin_only
async def list_link_generation(request: Request) -> Response:
    where, limit, after_id = parse_listing_query(request.query_params.multi_items())
    states, next_after_id = await run_in_threadpool(
        request.app.state.sessions.list_link_generation, where, limit, after_id
    )
    page = SessionPage(items=[SessionListItem.of(s) for s in states], nextAfterId=next_after_id)
    return success(body(page))


async def get_link_generation(request: Request) -> Response:
    session_id = parse_session_id(request.path_params["id"])
    state = await run_in_threadpool(request.app.state.sessions.get_link_generation, session_id)
    return success(body(LinkGenerationReadResponse.of(state)))


async def set_link_generation(request: Request) -> Response:
    session_id = parse_session_id(request.path_params["id"])
    at = parse_set_body(await read_body(request, MAX_BODY_BYTES))
    # The best-effort AWS call runs on the fast path's own threads and pool, after the
    # commit, so AWS never holds the admin or takes what another request needs.
    state = await run_in_threadpool(
        request.app.state.sessions.set_link_generation,
        session_id,
        at,
        actor_id(request),
        request.app.state.fast_path.submit,
    )
    return success(body(LinkGenerationResponse.of(state)))


@admin_only
async def programme_link_generation(request: Request) -> Response:
    program_id = parse_program_id(request.path_params["programId"])
    action = parse_programme_body(await read_body(request, MAX_BODY_BYTES), program_id)
    result = await run_in_threadpool(
        request.app.state.programmes.act,
        action,
        actor_id(request),
        parse_idempotency_key(request.headers.get("idempotency-key")),
    )
    return success(body(OperationResponse.of(result)))


@admin_only
async def programme_operation(request: Request) -> Response:
    program_id = parse_program_id(request.path_params["programId"])
    operation_id = parse_operation_id(request.path_params["operationId"])
    record = await run_in_threadpool(request.app.state.programmes.record, program_id, operation_id)
    return success(body(OperationRecordResponse.of(record)))


async def healthz(request: Request) -> Response:
    return success({"status": "ok"})


async def readyz(request: Request) -> Response:
    await request.app.state.readiness.ensure()
    return success({"status": "ready", "database": "ok"})


async def metrics(request: Request) -> Response:
    body = await run_in_threadpool(generate_latest, request.app.state.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> Response:
    return JSONResponse(request.app.state.openapi)
