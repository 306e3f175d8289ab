"""Minting bearer tokens for local use and tests (production tokens come from the IdP)."""

import time

import jwt


def mint_token(
    secret: str,
    *,
    user_id: int = 1,
    roles: tuple[str, ...] = ("admin",),
    ttl_seconds: int = 3600,
    issuer: str | None = None,
    audience: str | None = None,
) -> str:
    """An HS256 token; ``iss`` and ``aud`` only when given (the API's JLG_JWT_ISSUER and
    JLG_JWT_AUDIENCE)."""
    now = int(time.time())
    claims: dict[str, object] = {
        "sub": str(user_id),
        "roles": list(roles),
        "iat": now,
        "exp": now + ttl_seconds,
    }
    if issuer:
        claims["iss"] = issuer
    if audience:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm="HS256")
