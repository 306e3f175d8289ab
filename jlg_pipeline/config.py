"""The one place configuration is read: :class:`Settings` from the environment (documented in
``.env.example``) through pydantic-settings, read and checked once when an entry point starts
and handed on from there (to Dagster through the resources, to the web app through
``create_app``). A process's environment cannot change while it runs: the two switches, like
everything else, take effect at a restart; the Dagster UI's sensor and schedule toggles switch
a path off at once."""

import os
from collections.abc import Mapping
from contextvars import ContextVar
from enum import StrEnum
from typing import Any

from pydantic import AliasChoices, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from jlg_pipeline.domain.constants import (
    GENERATION_CONCURRENCY,
    ONLINE_SESSION_TIMEOUT_S,
    TimingWindows,
)
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.run_sharing import (
    DEFAULT_MAX_SESSIONS_PER_RUN,
    DEFAULT_SHARE_ABOVE,
    MAX_SESSIONS_PER_RUN,
    RunSharing,
)
from jlg_pipeline.domain.service_view import DEFAULT_MAX_PAUSE_S, Budget

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/jlg"
MIN_JWT_SECRET_BYTES = 32
MIN_JWT_SECRET_DISTINCT_CHARS = 10
# The placeholder in .env.example: anyone who has read the repository knows it.
EXAMPLE_JWT_SECRET = "change-me-to-a-long-random-secret-of-32-bytes-or-more"  # noqa: S105
DEFAULT_JWT_MAX_TTL_S = 86_400
MIN_TEST_WINDOW_MS = 1000
MAX_GENERATION_CONCURRENCY = 32


class RegistrarKind(StrEnum):
    LOCAL = "local"
    HTTP = "http"


class Environment(StrEnum):
    """JLG_ENVIRONMENT. ``production`` (the default) holds the web app to what a deployment
    needs (a token's issuer and audience checked); ``local`` is the local stack's."""

    PRODUCTION = "production"
    LOCAL = "local"


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
    raise ConfigError(f"{name} must be true or false")


SCHEDULER_FLAG = "ENABLE_JOIN_LINK_SCHEDULER"
FALLBACK_CRON_FLAG = "ENABLE_JOIN_LINK_FALLBACK_CRON"


DEFAULT_SQS_SENSOR_INTERVAL_S = 5
DEFAULT_SQS_WAIT_S = 4
MAX_SQS_WAIT_S = 20  # SQS's own limit
DEFAULT_RETENTION_DAYS = 30.0


TEST_WINDOW_VARIABLES = (
    ("JLG_TEST_GRACE_MS", "grace_ms"),
    ("JLG_TEST_STALE_MS", "stale_ms"),
    ("JLG_TEST_WATCHDOG_GRACE_MS", "watchdog_grace_ms"),
)


def timing_windows(env: Mapping[str, str]) -> TimingWindows:
    """The production windows, unless ``JLG_TEST_GRACE_MS`` / ``JLG_TEST_STALE_MS`` /
    ``JLG_TEST_WATCHDOG_GRACE_MS`` shorten them: for tests and local experiments only, never
    set in production. Each is at least a second: a stale window near zero would make every
    running generation reclaimable."""
    defaults = TimingWindows()
    values = {}
    for name, field_name in TEST_WINDOW_VARIABLES:
        raw = env.get(name)
        if raw:
            if not raw.strip().isdigit():
                raise ConfigError(f"{name} must be a whole number of milliseconds")
            if int(raw) < MIN_TEST_WINDOW_MS:
                raise ConfigError(f"{name} must be at least {MIN_TEST_WINDOW_MS} ms")
            values[field_name] = int(raw)
    return TimingWindows(
        grace_ms=values.get("grace_ms", defaults.grace_ms),
        stale_ms=values.get("stale_ms", defaults.stale_ms),
        watchdog_grace_ms=values.get("watchdog_grace_ms", defaults.watchdog_grace_ms),
    )


_ONLY_GIVEN: ContextVar[bool] = ContextVar("settings_from_a_mapping_only", default=False)


class Settings(BaseSettings):
    """The application's settings, each from the environment variable named as its alias
    (documented in ``.env.example``); blank means unset. Build with :meth:`from_env`, which
    turns any bad value into a ConfigError naming the variable."""

    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", populate_by_name=True, hide_input_in_errors=True
    )

    environment: Environment = Field(Environment.PRODUCTION, validation_alias="JLG_ENVIRONMENT")
    database_url: str = Field(validation_alias="JLG_DATABASE_URL", repr=False)
    """Required in production; a local environment falls back to DEFAULT_DATABASE_URL."""
    dagster_reader_url: str | None = Field(
        None,
        validation_alias=AliasChoices("JLG_DAGSTER_READER_URL", "DAGSTER_POSTGRES_URL"),
        repr=False,
    )
    """Dagster's storage as the admin API reads the orchestrator's health from it for /metrics
    (unset: those figures are not shown): JLG_DAGSTER_READER_URL, a SELECT-only role
    (docs/operations.md "Database roles"), else the instance's own DAGSTER_POSTGRES_URL. Read
    through a read-only connection either way."""
    registrar: RegistrarKind = Field(RegistrarKind.LOCAL, validation_alias="JLG_REGISTRAR")
    online_session_url: str | None = Field(
        None, validation_alias="JLG_ONLINE_SESSION_URL", repr=False
    )
    online_session_token: str | None = Field(
        None, validation_alias="JLG_ONLINE_SESSION_TOKEN", repr=False
    )
    online_session_timeout_s: float = Field(
        ONLINE_SESSION_TIMEOUT_S,
        validation_alias="JLG_ONLINE_SESSION_TIMEOUT_S",
        gt=0,
        allow_inf_nan=False,
    )
    online_session_rate: float | None = Field(
        None, validation_alias="JLG_ONLINE_SESSION_RATE", gt=0, le=10_000, allow_inf_nan=False
    )
    """bulkRegister calls a second across every run and process (None: no budget)."""
    online_session_burst: float | None = Field(
        None, validation_alias="JLG_ONLINE_SESSION_BURST", ge=1, le=100_000, allow_inf_nan=False
    )
    """Calls that may start at once (default: one second's worth)."""
    online_session_max_pause_s: float = Field(
        DEFAULT_MAX_PAUSE_S,
        validation_alias="JLG_ONLINE_SESSION_MAX_PAUSE_S",
        ge=1,
        le=86_400,
        allow_inf_nan=False,
    )
    """The longest pause one answer's ``Retry-After`` imposes on every caller; then one probe."""
    jwt_secret: str | None = Field(None, validation_alias="JLG_JWT_SECRET", repr=False)
    jwt_public_key: str | None = Field(None, validation_alias="JLG_JWT_PUBLIC_KEY", repr=False)
    jwt_issuer: str | None = Field(None, validation_alias="JLG_JWT_ISSUER")
    jwt_audience: str | None = Field(None, validation_alias="JLG_JWT_AUDIENCE")
    jwt_max_ttl_s: int = Field(DEFAULT_JWT_MAX_TTL_S, validation_alias="JLG_JWT_MAX_TTL_S", gt=0)
    max_sessions_per_run: int = Field(
        DEFAULT_MAX_SESSIONS_PER_RUN,
        validation_alias="JLG_MAX_SESSIONS_PER_RUN",
        ge=1,
        le=MAX_SESSIONS_PER_RUN,
    )
    """Sessions one shared generation run holds at most (docs/design.md "Bursts"); 1 never
    shares."""
    share_runs_above: int = Field(
        DEFAULT_SHARE_ABOVE, validation_alias="JLG_SHARE_RUNS_ABOVE", ge=0, le=10_000
    )
    """Units waiting for a run up to which each gets its own run; 0 always shares."""
    generation_concurrency: int = Field(
        GENERATION_CONCURRENCY,
        validation_alias="JLG_GENERATION_CONCURRENCY",
        ge=1,
        le=MAX_GENERATION_CONCURRENCY,
    )
    """Sessions a run generates at once: the bulkRegister calls one run opens at once."""
    scheduler_enabled: bool = Field(False, validation_alias=SCHEDULER_FLAG)
    """ENABLE_JOIN_LINK_SCHEDULER: the real-time path, schedule sync and the watchdog."""
    fallback_cron_enabled: bool = Field(False, validation_alias=FALLBACK_CRON_FLAG)
    """ENABLE_JOIN_LINK_FALLBACK_CRON: the 4-hourly sweep."""
    sqs_queue_url: str | None = Field(None, validation_alias="JLG_SQS_QUEUE_URL")
    sqs_sensor_interval_s: int = Field(
        DEFAULT_SQS_SENSOR_INTERVAL_S, validation_alias="JLG_SQS_SENSOR_INTERVAL_S", gt=0
    )
    """How often the SQS sensor ticks (orchestration/sensor_ticks.py): Dagster's sensor daemon
    looks every 5 s, so the spacing is the next multiple of 5 s."""
    sqs_wait_s: int = Field(
        DEFAULT_SQS_WAIT_S, validation_alias="JLG_SQS_WAIT_S", ge=0, le=MAX_SQS_WAIT_S
    )
    """How long a tick's first receive long-polls an empty queue: under the 5 s loop, so a
    tick that finds nothing ends before the next is due."""
    dagster_retention_days: float = Field(
        DEFAULT_RETENTION_DAYS,
        validation_alias="JLG_DAGSTER_RETENTION_DAYS",
        ge=1,
        lt=100_000,
        allow_inf_nan=False,
    )
    """Days a finished Dagster run is kept before the prune job deletes it."""
    scheduler_target: ScheduleTarget | None = None
    """From AWS_SCHEDULER_TARGET_QUEUE_ARN, AWS_SCHEDULER_EXECUTION_ROLE_ARN and
    AWS_SCHEDULER_GROUP_NAME; None unless both ARNs are set."""
    aws_endpoint_url: str | None = Field(None, validation_alias="AWS_ENDPOINT_URL")
    aws_region: str | None = Field(
        None, validation_alias=AliasChoices("AWS_DEFAULT_REGION", "AWS_REGION")
    )
    windows: TimingWindows = Field(default_factory=TimingWindows)
    """From JLG_TEST_GRACE_MS / JLG_TEST_STALE_MS (tests only); the constants otherwise."""

    # Read only to build scheduler_target and windows above (declared so the environment
    # source reads them).
    queue_arn: str | None = Field(None, validation_alias="AWS_SCHEDULER_TARGET_QUEUE_ARN")
    role_arn: str | None = Field(None, validation_alias="AWS_SCHEDULER_EXECUTION_ROLE_ARN")
    group_name: str | None = Field(None, validation_alias="AWS_SCHEDULER_GROUP_NAME")
    test_grace_ms: str | None = Field(None, validation_alias="JLG_TEST_GRACE_MS", repr=False)
    test_stale_ms: str | None = Field(None, validation_alias="JLG_TEST_STALE_MS", repr=False)
    test_watchdog_grace_ms: str | None = Field(
        None, validation_alias="JLG_TEST_WATCHDOG_GRACE_MS", repr=False
    )

    @model_validator(mode="before")
    @classmethod
    def _from_variables(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        raw = {k: v for k, v in values.items() if not (isinstance(v, str) and not v.strip())}
        for kind in ("JLG_REGISTRAR", "JLG_ENVIRONMENT"):
            if isinstance(raw.get(kind), str):
                raw[kind] = raw[kind].strip().lower()
        _production_means_production(raw)
        for flag in (SCHEDULER_FLAG, FALLBACK_CRON_FLAG):
            if isinstance(raw.get(flag), str):
                raw[flag] = parse_flag(flag, raw[flag])
        if "scheduler_target" not in raw:
            raw["scheduler_target"] = ScheduleTarget.of(
                raw.get("AWS_SCHEDULER_TARGET_QUEUE_ARN"),
                raw.get("AWS_SCHEDULER_EXECUTION_ROLE_ARN"),
                raw.get("AWS_SCHEDULER_GROUP_NAME"),
            )
        if "windows" not in raw:
            raw["windows"] = timing_windows(raw)
        return raw

    @model_validator(mode="after")
    def _http_needs_url_token_and_a_short_bound(self) -> "Settings":
        if self.registrar is not RegistrarKind.HTTP:
            return self
        if not (self.online_session_url and self.online_session_token):
            raise ConfigError(
                "JLG_REGISTRAR=http needs JLG_ONLINE_SESSION_URL and JLG_ONLINE_SESSION_TOKEN"
            )
        half_stale_s = self.windows.stale_ms / 2000
        if self.online_session_timeout_s >= half_stale_s:
            # A call is abandoned at its bound and asked again under the same key; one that
            # could outlast half the stale window would be asked again after its claim is
            # taken over.
            raise ConfigError(
                f"JLG_ONLINE_SESSION_TIMEOUT_S must be under half the stale window "
                f"({half_stale_s:g} s), got {self.online_session_timeout_s:g}"
            )
        return self

    def online_session_budget(self) -> Budget:
        return Budget.of(
            self.online_session_rate, self.online_session_burst, self.online_session_max_pause_s
        )

    def run_sharing(self) -> RunSharing:
        return RunSharing(self.max_sessions_per_run, self.share_runs_above)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """Settings from ``environ`` alone, or the process environment when None."""
        only_given = _ONLY_GIVEN.set(environ is not None)
        try:
            return cls() if environ is None else cls.model_validate(dict(environ))
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None
        finally:
            _ONLY_GIVEN.reset(only_given)

    @classmethod
    def from_process(
        cls, overrides: Mapping[str, str] | None = None, defaults: Mapping[str, str] | None = None
    ) -> "Settings":
        """Settings from this process's environment, ``defaults`` under it and ``overrides``
        (a command-line flag) over it."""
        return cls.from_env({**(defaults or {}), **os.environ, **(overrides or {})})

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # pydantic-settings merges the process environment into values given explicitly;
        # from_env(mapping) means that mapping, nothing else.
        return (init_settings,) if _ONLY_GIVEN.get() else (init_settings, env_settings)

    def require_jwt_key(self) -> None:
        """The web app cannot authenticate anyone without a key, and in production must not
        take a token minted for another service: fail at start, clearly."""
        if not self.jwt_public_key:
            if not self.jwt_secret:
                raise ConfigError("set JLG_JWT_SECRET (HS256) or JLG_JWT_PUBLIC_KEY (RS256)")
            check_jwt_secret(self.jwt_secret)
        if self.environment is Environment.PRODUCTION and not (
            self.jwt_issuer and self.jwt_audience
        ):
            raise ConfigError(
                "JLG_JWT_ISSUER and JLG_JWT_AUDIENCE must be set in production (without them "
                "a token the same key signed for another service is taken); "
                "JLG_ENVIRONMENT=local lets a local stack leave them unset"
            )


def _production_means_production(raw: dict[str, Any]) -> None:
    """In production (the default) the knobs for tests are refused and the database must be
    named; a local environment may leave it to DEFAULT_DATABASE_URL (a superuser on this
    machine). Keys may be the variables' names or the fields'."""
    environment = raw.get("JLG_ENVIRONMENT", raw.get("environment", Environment.PRODUCTION))
    named = "JLG_DATABASE_URL" in raw or "database_url" in raw
    if environment != Environment.PRODUCTION:
        if not named:
            raw["JLG_DATABASE_URL"] = DEFAULT_DATABASE_URL
        return
    for name, field_name in TEST_WINDOW_VARIABLES:
        if name in raw or f"test_{field_name}" in raw:
            raise ConfigError(
                f"{name} is for tests only and is refused in production (a shortened window "
                "makes a running generation reclaimable); JLG_ENVIRONMENT=local allows it"
            )
    if not named:
        raise ConfigError(
            "JLG_DATABASE_URL must be set in production (the built-in default is a superuser "
            "on 127.0.0.1); JLG_ENVIRONMENT=local falls back to it"
        )


def _describe(exc: ValidationError) -> str:
    """The first problem, named by its variable; no value is ever repeated (a secret, or a
    URL holding one, may sit in any of them, and a log keeps the error)."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "configuration"
    if error["type"] == "enum":
        kinds = [k.value for k in (Environment if name == "JLG_ENVIRONMENT" else RegistrarKind)]
        return f"{name} must be one of {kinds}"
    return f"{name}: {error['msg'].lower()}"


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
