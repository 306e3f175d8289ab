"""The OpenAPI 3.1 document for the front door, served at ``/openapi.json``: schemas from
the pydantic models in ``web.schemas``, error responses from the one error table."""

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from jlg_pipeline.domain.constants import BIGINT_MAX
from web.envelope import ERRORS
from web.schemas import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    AttemptResponse,
    ChangeResponse,
    ErrorEnvelope,
    LinkGenerationResponse,
    SessionPage,
    SetLinkGenerationDto,
)


def _schemas(*models: type[BaseModel]) -> dict[str, Any]:
    """The models' JSON schemas, nested models included, as OpenAPI components."""
    _, document = models_json_schema(
        [(model, "validation") for model in models],
        ref_template="#/components/schemas/{model}",
    )
    return dict(document["$defs"])


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["success", "data", "error"],
        "properties": {
            "success": {"const": True},
            "data": data,
            "error": {"type": "null"},
        },
    }


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
    }


def _errors(*codes: int) -> dict[str, Any]:
    return {str(code): _error_response(ERRORS[code].description) for code in codes}


def _ok(description: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _envelope(data)}},
    }


def build_openapi() -> dict[str, Any]:
    link_ok = {
        "description": "The session's link-generation state",
        "content": {
            "application/json": {
                "schema": _envelope({"$ref": "#/components/schemas/LinkGenerationResponse"})
            }
        },
    }
    session_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "Program session id",
        "schema": {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
    }
    identity_headers = [
        {
            "name": "X-Active-Role",
            "in": "header",
            "required": True,
            "description": "The role acting now; must be one of the token's roles, and admin here",
            "schema": {"type": "string"},
        },
        {
            "name": "X-User-Id",
            "in": "header",
            "required": False,
            "description": "When sent, must equal the token's sub",
            "schema": {"type": "string"},
        },
    ]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jlg-pipeline admin API",
            "version": "1.0.0",
            "description": "Schedule join-link generation for program sessions.",
        },
        "paths": {
            "/program-session/{id}/link-generation": {
                "parameters": [session_id, *identity_headers],
                "get": {
                    "operationId": "getLinkGeneration",
                    "summary": "Read a session's link-generation time and status",
                    "security": [{"bearer": []}],
                    "responses": {
                        "200": link_ok,
                        **_errors(400, 401, 403, 404, 500, 503),
                    },
                },
                "patch": {
                    "operationId": "setLinkGeneration",
                    "summary": "Schedule (a future time) or clear (null) link generation",
                    "security": [{"bearer": []}],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/SetLinkGenerationDto"}
                            }
                        },
                    },
                    "responses": {
                        "200": link_ok,
                        **_errors(400, 401, 403, 404, 409, 413, 500, 503),
                    },
                },
            },
            "/program-session/{id}/link-generation/attempts": {
                "parameters": [session_id, *identity_headers],
                "get": {
                    "operationId": "getLinkGenerationAttempts",
                    "summary": "A session's generation attempts, newest first (at most 50)",
                    "security": [{"bearer": []}],
                    "responses": {
                        "200": _ok(
                            "The attempts; [] for a session never attempted",
                            {
                                "type": "array",
                                "items": {"$ref": "#/components/schemas/AttemptResponse"},
                            },
                        ),
                        **_errors(400, 401, 403, 404, 500, 503),
                    },
                },
            },
            "/program-session/{id}/link-generation/changes": {
                "parameters": [session_id, *identity_headers],
                "get": {
                    "operationId": "getLinkGenerationChanges",
                    "summary": "Who changed the session's time, newest first (at most 50)",
                    "security": [{"bearer": []}],
                    "responses": {
                        "200": _ok(
                            "The changes; [] for a session never armed or cleared through the API",
                            {
                                "type": "array",
                                "items": {"$ref": "#/components/schemas/ChangeResponse"},
                            },
                        ),
                        **_errors(400, 401, 403, 404, 500, 503),
                    },
                },
            },
            "/program-session/link-generation": {
                "parameters": identity_headers,
                "get": {
                    "operationId": "listLinkGeneration",
                    "summary": "Sessions' link-generation state, by id, a page at a time",
                    "security": [{"bearer": []}],
                    "parameters": [
                        {
                            "name": "status",
                            "in": "query",
                            "required": False,
                            "schema": {"$ref": "#/components/schemas/LinkGenerationStatus"},
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
                            "schema": {
                                "type": "integer",
                                "minimum": 0,
                                "maximum": BIGINT_MAX,
                                "default": 0,
                            },
                        },
                    ],
                    "responses": {
                        "200": _ok(
                            "A page of sessions", {"$ref": "#/components/schemas/SessionPage"}
                        ),
                        **_errors(400, 401, 403, 500, 503),
                    },
                },
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "Liveness (no auth, touches nothing)",
                    "responses": {"200": {"description": "Alive"}},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "summary": "Readiness: the database answers",
                    "responses": {"200": {"description": "Ready"}, **_errors(503)},
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
            "schemas": {
                **_schemas(
                    SetLinkGenerationDto,
                    LinkGenerationResponse,
                    AttemptResponse,
                    ChangeResponse,
                    SessionPage,
                    ErrorEnvelope,
                ),
            },
        },
    }
