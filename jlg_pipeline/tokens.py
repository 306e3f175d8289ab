"""Minting bearer tokens for local use and tests (production tokens come from the IdP)."""

import time

import jwt


def mint_token(
    secret: str,
    *,
    user_id: int = 1,
    roles: tuple[str, ...] = ("admin",),
    ttl_seconds: int = 3600,
) -> str:
    now = int(time.time())
    claims = {"sub": str(user_id), "roles": list(roles), "iat": now, "exp": now + ttl_seconds}
    return jwt.encode(claims, secret, algorithm="HS256")
