"""The one table of the front door's endpoints: ``app.py`` routes it and ``openapi.py``
documents it, so a route and its description cannot drift apart."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from jlg_pipeline.domain.constants import BIGINT_MAX
from web import routes
from web.parsing import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT
from web.schemas import ProgrammeActionDto, SetLinkGenerationDto

ADMIN_ERRORS = (400, 401, 403, 500, 503)


def ref(model: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model}"}


def array_of(model: str) -> dict[str, Any]:
    return {"type": "array", "items": ref(model)}


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    operation_id: str
    summary: str
    ok: str
    """What a 200 carries."""
    data: dict[str, Any] | None
    """The JSON schema of the success envelope's ``data``; None: a bare 200."""
    errors: tuple[int, ...]
    body: type[BaseModel] | None = None
    parameters: tuple[dict[str, Any], ...] = ()
    """Query and header parameters."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    handler: Callable[[Request], Awaitable[Response]]
    operations: tuple[Operation, ...]
    admin: bool = False
    """Behind the bearer token, the identity headers and the admin role."""

    @property
    def methods(self) -> list[str]:
        return [operation.method for operation in self.operations]


@dataclass(frozen=True, slots=True)
class Internal:
    """Served, for machines, and left out of the document: a GET, no auth."""

    path: str
    handler: Callable[[Request], Awaitable[Response]]
    admin = False
    methods = ("GET",)


LIST_QUERY = (
    {
        "name": "programId",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
    },
    {
        "name": "status",
        "in": "query",
        "required": False,
        "description": "One or more statuses, comma-separated (or the parameter repeated)",
        "style": "form",
        "explode": False,
        "schema": {"type": "array", "items": ref("LinkGenerationStatus"), "minItems": 1},
    },
    {
        "name": "from",
        "in": "query",
        "required": False,
        "description": "linkGenerationAt at or after (RFC 3339)",
        "schema": {"type": "string", "format": "date-time"},
    },
    {
        "name": "to",
        "in": "query",
        "required": False,
        "description": "linkGenerationAt before (RFC 3339)",
        "schema": {"type": "string", "format": "date-time"},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIST_LIMIT,
            "default": DEFAULT_LIST_LIMIT,
        },
    },
    {
        "name": "afterId",
        "in": "query",
        "required": False,
        "description": "The previous page's nextAfterId",
        "schema": {"type": "integer", "minimum": 0, "maximum": BIGINT_MAX, "default": 0},
    },
)

SESSION = "/program-session/{id}/link-generation"
PROGRAMME = "/program/{programId}/link-generation"
IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Required unless dryRun (400 without it). A repeat with the same key answers "
    "the first result without acting again, and finishes an operation cut off part-way",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
}

ENDPOINTS = (
    Endpoint(
        SESSION,
        routes.link_generation,
        (
            Operation(
                "GET",
                "getLinkGeneration",
                "Read a session's link-generation time and status",
                "The session's link-generation state",
                ref("LinkGenerationReadResponse"),
                (*ADMIN_ERRORS, 404),
            ),
            Operation(
                "PATCH",
                "setLinkGeneration",
                "Schedule (a future time) or clear (null) link generation",
                "The session's link-generation state",
                ref("LinkGenerationResponse"),
                (*ADMIN_ERRORS, 404, 409, 413),
                body=SetLinkGenerationDto,
            ),
        ),
        admin=True,
    ),
    Endpoint(
        f"{SESSION}/attempts",
        routes.link_generation_attempts,
        (
            Operation(
                "GET",
                "getLinkGenerationAttempts",
                "A session's generation attempts, newest first (at most 50)",
                "The attempts; [] for a session never attempted",
                array_of("AttemptResponse"),
                (*ADMIN_ERRORS, 404),
            ),
        ),
        admin=True,
    ),
    Endpoint(
        f"{SESSION}/why",
        routes.link_generation_why,
        (
            Operation(
                "GET",
                "getLinkGenerationWhy",
                "Why a session is not generated yet: whether it waits now, every hold with the "
                "time it ends, its last attempts and what happens to it next",
                "The answer, from the queue's own predicates",
                ref("WhyResponse"),
                (*ADMIN_ERRORS, 404),
            ),
        ),
        admin=True,
    ),
    Endpoint(
        f"{SESSION}/changes",
        routes.link_generation_changes,
        (
            Operation(
                "GET",
                "getLinkGenerationChanges",
                "Who changed the session's time, newest first (at most 50)",
                "The changes; [] for a session never armed or cleared through the API",
                array_of("ChangeResponse"),
                (*ADMIN_ERRORS, 404),
            ),
        ),
        admin=True,
    ),
    Endpoint(
        "/program-session/link-generation",
        routes.list_link_generation,
        (
            Operation(
                "GET",
                "listLinkGeneration",
                "Sessions' link-generation state, by id, a page at a time",
                "A page of sessions",
                ref("SessionPage"),
                ADMIN_ERRORS,
                parameters=LIST_QUERY,
            ),
        ),
        admin=True,
    ),
    Endpoint(
        PROGRAMME,
        routes.programme_link_generation,
        (
            Operation(
                "PATCH",
                "actOnProgramme",
                "Re-arm, move or clear a programme's sessions at once (dryRun first)",
                "What changed and what was skipped, and why (a dry run: would)",
                ref("OperationResponse"),
                (*ADMIN_ERRORS, 409, 413, 422),
                body=ProgrammeActionDto,
                parameters=(IDEMPOTENCY_KEY,),
            ),
        ),
        admin=True,
    ),
    Endpoint(
        f"{PROGRAMME}/operations/{{operationId}}",
        routes.programme_operation,
        (
            Operation(
                "GET",
                "getProgrammeOperation",
                "A programme action's record: who, when, what, and what happened",
                "The operation",
                ref("OperationRecordResponse"),
                (*ADMIN_ERRORS, 404),
            ),
        ),
        admin=True,
    ),
    Endpoint(
        "/healthz",
        routes.healthz,
        (Operation("GET", "healthz", "Liveness (no auth, touches nothing)", "Alive", None, ()),),
    ),
    Endpoint(
        "/readyz",
        routes.readyz,
        (Operation("GET", "readyz", "Readiness: the database answers", "Ready", None, (503,)),),
    ),
)
INTERNAL = (Internal("/metrics", routes.metrics), Internal("/openapi.json", routes.openapi))
