"""Bearer JWT authentication (TRD §Security Design, pinned in docs/design.md).

401: no bearer or two Authorization headers, or a token that is malformed, signed with
another key, expired or missing ``exp``/``sub``/``roles``, whose ``exp`` is not a number or
lies further ahead than the configured maximum lifetime, or whose ``iss``/``aud`` do not
match the configured ones.
403: a valid token whose request may not act as admin — no ``X-Active-Role``, an active
role the token does not hold, an active role other than admin, an ``X-User-Id`` that is
not the token's ``sub``, or either header sent twice.
"""

import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps

import jwt
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from jlg_pipeline.domain.constants import INT_MAX
from web.envelope import error

IDENTITY_HEADERS = ("X-Active-Role", "X-User-Id")
"""Headers that say who acts, besides the token: each may appear once."""

ADMIN = "admin"
_USER_ID = re.compile(r"[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class Principal(BaseUser):
    user_id: int
    roles: tuple[str, ...]
    active_role: str | None
    refusal: str | None
    """Why this authenticated caller may not act as admin, or None when it may."""

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return str(self.user_id)


class JwtBackend(AuthenticationBackend):
    def __init__(
        self,
        *,
        secret: str | None,
        public_key: str | None,
        issuer: str | None = None,
        audience: str | None = None,
        max_ttl_s: int = 86_400,
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self._max_ttl_s = max_ttl_s
        # One algorithm per deployment: never accept HS256 when an RS256 key is configured.
        if public_key:
            self._key, self._algorithms = public_key, ["RS256"]
        elif secret:
            self._key, self._algorithms = secret, ["HS256"]
        else:
            raise ValueError("a JWT secret or public key is required")

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser]:
        # A second copy of a header that says who acts would be read by one layer and
        # checked by another: refused, never chosen between.
        if len(conn.headers.getlist("authorization")) > 1:
            raise AuthenticationError("send one Authorization header")
        header = conn.headers.get("authorization")
        if not header:
            raise AuthenticationError("missing bearer token")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("Authorization must be 'Bearer <token>'")
        try:
            claims = jwt.decode(
                token.strip(),
                self._key,
                algorithms=self._algorithms,
                issuer=self._issuer,
                audience=self._audience,
                # Without a configured audience, a token's aud is not ours to judge.
                options={"require": ["exp", "sub"], "verify_aud": self._audience is not None},
            )
        except jwt.ExpiredSignatureError:
            raise AuthenticationError("token expired") from None
        except jwt.InvalidTokenError as exc:
            raise AuthenticationError(f"invalid token: {exc}") from None
        self._check_lifetime(claims["exp"])

        sub = claims["sub"]
        if not isinstance(sub, str) or not _USER_ID.fullmatch(sub) or int(sub) > INT_MAX:
            raise AuthenticationError("token sub must be a positive integer user id")
        roles = claims.get("roles")
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise AuthenticationError("token roles must be a list of strings")

        active = conn.headers.get("x-active-role")
        claimed_user = conn.headers.get("x-user-id")
        repeated = [h for h in IDENTITY_HEADERS if len(conn.headers.getlist(h)) > 1]
        refusal = None
        if repeated:
            refusal = f"send the {repeated[0]} header once"
        elif claimed_user is not None and claimed_user.strip() != sub:
            refusal = "X-User-Id does not match the token"
        elif not active:
            refusal = "X-Active-Role header is required"
        elif active not in roles:
            refusal = f"the token does not hold the role {active!r}"
        elif active != ADMIN:
            refusal = "admin role required"
        scopes = ["authenticated"] + ([ADMIN] if refusal is None else [])
        return AuthCredentials(scopes), Principal(int(sub), tuple(roles), active, refusal)

    def _check_lifetime(self, exp: object) -> None:
        # PyJWT accepts a numeric string and any far future; neither is a bounded token.
        if (
            isinstance(exp, bool)
            or not isinstance(exp, int | float)
            or (isinstance(exp, float) and not math.isfinite(exp))
        ):
            raise AuthenticationError("invalid token: exp must be a number")
        if exp > time.time() + self._max_ttl_s:
            raise AuthenticationError(f"invalid token: exp is more than {self._max_ttl_s} s ahead")


def on_auth_error(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    return error(401, str(exc), headers={"WWW-Authenticate": "Bearer"})


Endpoint = Callable[[Request], Awaitable[Response]]


def admin_only(endpoint: Endpoint) -> Endpoint:
    @wraps(endpoint)
    async def guarded(request: Request) -> Response:
        if ADMIN not in request.auth.scopes:
            user = request.user
            reason = user.refusal if isinstance(user, Principal) else None
            return error(403, reason or "admin role required")
        return await endpoint(request)

    return guarded


def actor_id(request: Request) -> int:
    """The acting user for ``updated_by``: from the token, never from the body."""
    user = request.user
    if not isinstance(user, Principal):
        raise TypeError("actor_id is for endpoints behind admin_only")
    return user.user_id
