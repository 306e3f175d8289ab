"""The OpenAPI 3.1 document for the front door, served at ``/openapi.json``."""

from typing import Any

from web.schemas import LinkGenerationResponse, SetLinkGenerationDto

ERROR_CODES = {
    "400": "Invalid id or body: not JSON, not an object, missing or unknown key, a time that "
    "is not RFC 3339, has no offset, or is not in the future",
    "401": "Missing, malformed, wrongly signed or expired bearer token; an exp that is not a "
    "number or too far ahead; an iss or aud other than the configured ones",
    "403": "Not acting as admin: no X-Active-Role, a role the token does not hold, a role "
    "other than admin, or an X-User-Id that is not the token's sub",
    "404": "No such program session, or it is soft-deleted",
    "405": "Method not allowed on this path",
    "409": "A generation holds the session and is not stale; retry when it ends",
    "413": "Body larger than 4 KiB (refused while reading)",
    "500": "Unexpected error (logged; no details are returned)",
    "503": "The database is unavailable",
}


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


def _errors(*codes: str) -> dict[str, Any]:
    return {code: _error_response(ERROR_CODES[code]) for code in codes}


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
        "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
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
    dto_schema = SetLinkGenerationDto.model_json_schema()
    dto_schema["properties"]["linkGenerationAt"] = {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
        "description": dto_schema["properties"]["linkGenerationAt"]["description"],
    }
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
                        **_errors("400", "401", "403", "404", "500", "503"),
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
                        **_errors("400", "401", "403", "404", "409", "413", "500", "503"),
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
                    "responses": {"200": {"description": "Ready"}, **_errors("503")},
                }
            },
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
            },
            "schemas": {
                "SetLinkGenerationDto": dto_schema,
                "LinkGenerationResponse": LinkGenerationResponse.model_json_schema(),
                "ErrorEnvelope": {
                    "type": "object",
                    "required": ["success", "data", "error"],
                    "properties": {
                        "success": {"const": False},
                        "data": {"type": "null"},
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    }
