"""Settings read from the environment (documented in ``.env.example``), checked once."""

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.schedule import DEFAULT_GROUP, ScheduleTarget

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/jlg"
MIN_JWT_SECRET_BYTES = 32
MIN_JWT_SECRET_DISTINCT_CHARS = 10
# The placeholder in .env.example: anyone who has read the repository knows it.
EXAMPLE_JWT_SECRET = "change-me-to-a-long-random-secret-of-32-bytes-or-more"  # noqa: S105
DEFAULT_JWT_MAX_TTL_S = 86_400
DEFAULT_ONLINE_SESSION_TIMEOUT_S = 300.0
MIN_TEST_WINDOW_MS = 1000


Number = TypeVar("Number", int, float)


class RegistrarKind(StrEnum):
    LOCAL = "local"
    HTTP = "http"


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_flag(name: str, raw: str | None, default: bool = False) -> bool:
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def scheduler_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """ENABLE_JOIN_LINK_SCHEDULER, read when asked so flipping it needs no deploy."""
    env = os.environ if environ is None else environ
    return parse_flag("ENABLE_JOIN_LINK_SCHEDULER", env.get("ENABLE_JOIN_LINK_SCHEDULER"))


def fallback_cron_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """ENABLE_JOIN_LINK_FALLBACK_CRON, read when asked so flipping it needs no deploy."""
    env = os.environ if environ is None else environ
    return parse_flag("ENABLE_JOIN_LINK_FALLBACK_CRON", env.get("ENABLE_JOIN_LINK_FALLBACK_CRON"))


DEFAULT_SQS_SENSOR_INTERVAL_S = 5


def sqs_sensor_interval_s(environ: Mapping[str, str] | None = None) -> int:
    """JLG_SQS_SENSOR_INTERVAL_S: the least time between two SQS sensor ticks. Dagster's
    sensor daemon loops every 5 s, so lower values change nothing."""
    env = os.environ if environ is None else environ
    return _positive(env, "JLG_SQS_SENSOR_INTERVAL_S", DEFAULT_SQS_SENSOR_INTERVAL_S, int)


DEFAULT_SQS_WAIT_S = 4
MAX_SQS_WAIT_S = 20  # SQS's own limit


def sqs_wait_s(environ: Mapping[str, str] | None = None) -> int:
    """JLG_SQS_WAIT_S: how long a sensor tick's first receive long-polls an empty queue. Kept
    under the sensor loop's 5 s, so a tick that finds nothing ends before the next is due."""
    env = os.environ if environ is None else environ
    raw = (env.get("JLG_SQS_WAIT_S") or "").strip()
    if not raw:
        return DEFAULT_SQS_WAIT_S
    if not raw.isdigit() or int(raw) > MAX_SQS_WAIT_S:
        raise ConfigError(f"JLG_SQS_WAIT_S must be a whole number from 0 to 20, got {raw!r}")
    return int(raw)


def timing_windows(environ: Mapping[str, str] | None = None) -> TimingWindows:
    """The production windows, unless ``JLG_TEST_GRACE_MS`` / ``JLG_TEST_STALE_MS`` shorten
    them: for tests and local experiments only, never set in production. Each is at least
    a second: a stale window near zero would make every running generation reclaimable."""
    env = os.environ if environ is None else environ
    defaults = TimingWindows()
    values = {}
    for name, field_name in (("JLG_TEST_GRACE_MS", "grace_ms"), ("JLG_TEST_STALE_MS", "stale_ms")):
        raw = env.get(name)
        if raw:
            if not raw.strip().isdigit():
                raise ConfigError(f"{name} must be a whole number of milliseconds, got {raw!r}")
            if int(raw) < MIN_TEST_WINDOW_MS:
                raise ConfigError(f"{name} must be at least {MIN_TEST_WINDOW_MS} ms, got {raw}")
            values[field_name] = int(raw)
    return TimingWindows(
        grace_ms=values.get("grace_ms", defaults.grace_ms),
        stale_ms=values.get("stale_ms", defaults.stale_ms),
    )


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    registrar: RegistrarKind = RegistrarKind.LOCAL
    online_session_url: str | None = None
    online_session_token: str | None = field(default=None, repr=False)
    jwt_secret: str | None = field(default=None, repr=False)
    jwt_public_key: str | None = field(default=None, repr=False)
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_max_ttl_s: int = DEFAULT_JWT_MAX_TTL_S
    online_session_timeout_s: float = DEFAULT_ONLINE_SESSION_TIMEOUT_S
    scheduler_enabled: bool = False
    scheduler_target: ScheduleTarget | None = None
    aws_endpoint_url: str | None = None
    aws_region: str | None = None
    windows: TimingWindows = field(default_factory=TimingWindows)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        raw_registrar = env.get("JLG_REGISTRAR", RegistrarKind.LOCAL.value).strip().lower()
        try:
            registrar = RegistrarKind(raw_registrar)
        except ValueError:
            kinds = [k.value for k in RegistrarKind]
            raise ConfigError(
                f"JLG_REGISTRAR must be one of {kinds}, got {raw_registrar!r}"
            ) from None
        queue_arn = env.get("AWS_SCHEDULER_TARGET_QUEUE_ARN") or None
        role_arn = env.get("AWS_SCHEDULER_EXECUTION_ROLE_ARN") or None
        settings = cls(
            database_url=env.get("JLG_DATABASE_URL") or DEFAULT_DATABASE_URL,
            registrar=registrar,
            online_session_url=env.get("JLG_ONLINE_SESSION_URL") or None,
            online_session_token=env.get("JLG_ONLINE_SESSION_TOKEN") or None,
            jwt_secret=env.get("JLG_JWT_SECRET") or None,
            jwt_public_key=env.get("JLG_JWT_PUBLIC_KEY") or None,
            jwt_issuer=env.get("JLG_JWT_ISSUER") or None,
            jwt_audience=env.get("JLG_JWT_AUDIENCE") or None,
            jwt_max_ttl_s=_positive(env, "JLG_JWT_MAX_TTL_S", DEFAULT_JWT_MAX_TTL_S, int),
            online_session_timeout_s=_positive(
                env, "JLG_ONLINE_SESSION_TIMEOUT_S", DEFAULT_ONLINE_SESSION_TIMEOUT_S, float
            ),
            scheduler_enabled=scheduler_enabled(env),
            scheduler_target=ScheduleTarget(
                queue_arn=queue_arn,
                role_arn=role_arn,
                group_name=env.get("AWS_SCHEDULER_GROUP_NAME") or DEFAULT_GROUP,
            )
            if queue_arn and role_arn
            else None,
            aws_endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            aws_region=env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None,
            windows=timing_windows(env),
        )
        if registrar is RegistrarKind.HTTP and not (
            settings.online_session_url and settings.online_session_token
        ):
            raise ConfigError(
                "JLG_REGISTRAR=http needs JLG_ONLINE_SESSION_URL and JLG_ONLINE_SESSION_TOKEN"
            )
        return settings

    def require_jwt_key(self) -> None:
        """The web app cannot authenticate anyone without a key: fail at start, clearly."""
        if self.jwt_public_key:
            return
        if not self.jwt_secret:
            raise ConfigError("set JLG_JWT_SECRET (HS256) or JLG_JWT_PUBLIC_KEY (RS256)")
        check_jwt_secret(self.jwt_secret)


def check_jwt_secret(secret: str) -> None:
    """Refuse secrets an attacker could guess: short, repetitive, or the documented example."""
    if len(secret.encode()) < MIN_JWT_SECRET_BYTES:
        raise ConfigError(f"JLG_JWT_SECRET must be at least {MIN_JWT_SECRET_BYTES} bytes")
    if len(set(secret)) < MIN_JWT_SECRET_DISTINCT_CHARS:
        raise ConfigError(
            f"JLG_JWT_SECRET must have at least {MIN_JWT_SECRET_DISTINCT_CHARS} distinct "
            "characters; generate one with "
            "python -c 'import secrets; print(secrets.token_urlsafe(48))'"
        )
    if secret.strip() == EXAMPLE_JWT_SECRET:
        raise ConfigError("JLG_JWT_SECRET is the .env.example placeholder; generate a real one")


def _positive(
    env: Mapping[str, str], name: str, default: Number, kind: Callable[[str], Number]
) -> Number:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a positive number, got {raw!r}") from None
    if not 0 < value < float("inf"):
        raise ConfigError(f"{name} must be a positive number, got {raw!r}")
    return value
