"""The OpenAPI 3.1 document for the front door, served at ``/openapi.json``: paths from the
endpoint table (``web.endpoints``), schemas from the pydantic models in ``web.schemas``,
error responses from the one error table."""

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from jlg_pipeline.domain.constants import BIGINT_MAX
from web.endpoints import ENDPOINTS, Endpoint, Operation, ref
from web.envelope import ERRORS
from web.schemas import (
    AttemptResponse,
    ChangeResponse,
    ErrorEnvelope,
    LinkGenerationReadResponse,
    LinkGenerationResponse,
    OperationRecordResponse,
    OperationResponse,
    ProgrammeActionDto,
    SessionPage,
    SetLinkGenerationDto,
    WhyResponse,
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


def _operation(endpoint: Endpoint, operation: Operation) -> dict[str, Any]:
    ok: dict[str, Any] = {"description": operation.ok}
    if operation.data is not None:
        ok["content"] = {"application/json": {"schema": _envelope(operation.data)}}
    described: dict[str, Any] = {
        "operationId": operation.operation_id,
        "summary": operation.summary,
    }
    if endpoint.admin:
        described["security"] = [{"bearer": []}]
    if operation.parameters:
        described["parameters"] = list(operation.parameters)
    if operation.body is not None:
        described["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref(operation.body.__name__)}},
        }
    described["responses"] = {"200": ok, **_errors(*sorted(operation.errors))}
    return described


def _path(endpoint: Endpoint) -> dict[str, Any]:
    parameters = [p for name, p in PATH_PARAMETERS.items() if f"{{{name}}}" in endpoint.path]
    parameters += IDENTITY_HEADERS if endpoint.admin else []
    return {
        **({"parameters": parameters} if parameters else {}),
        **{op.method.lower(): _operation(endpoint, op) for op in endpoint.operations},
    }


PATH_PARAMETERS = {
    "id": {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "Program session id",
        "schema": {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
    },
    "programId": {
        "name": "programId",
        "in": "path",
        "required": True,
        "description": "Program id",
        "schema": {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
    },
    "operationId": {
        "name": "operationId",
        "in": "path",
        "required": True,
        "description": "The operation's id, as its PATCH answered",
        "schema": {"type": "string", "format": "uuid"},
    },
}
IDENTITY_HEADERS = [
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


def build_openapi() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jlg-pipeline admin API",
            "version": "1.0.0",
            "description": "Schedule join-link generation for program sessions.",
        },
        "paths": {e.path: _path(e) for e in ENDPOINTS},
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
            "schemas": {
                **_schemas(
                    SetLinkGenerationDto,
                    LinkGenerationResponse,
                    LinkGenerationReadResponse,
                    AttemptResponse,
                    ChangeResponse,
                    WhyResponse,
                    SessionPage,
                    ProgrammeActionDto,
                    OperationResponse,
                    OperationRecordResponse,
                    ErrorEnvelope,
                ),
            },
        },
    }
