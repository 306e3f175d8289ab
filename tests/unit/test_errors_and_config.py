import pytest

from jlg_pipeline.config import Environment, RegistrarKind, Settings, parse_flag
from jlg_pipeline.domain.errors import (
    ConfigError,
    DatabaseUnavailable,
    InvalidInput,
    NonRetryableGenerationFailed,
    RegistrarRejected,
    RegistrarUnavailable,
    RetryableGenerationFailed,
    is_retryable,
)
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.run_sharing import ONE_RUN_EACH, RunSharing
from jlg_pipeline.domain.validation import SessionId


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (RegistrarUnavailable("503"), True),
        (DatabaseUnavailable("gone"), True),
        (TimeoutError(), True),
        (RuntimeError("bug"), True),
        (RegistrarRejected("400"), False),
        (InvalidInput("bad"), False),
        (ConfigError("no url"), False),
        (RetryableGenerationFailed("x", session_id=SessionId(1), attempt=1, retryable=True), True),
        (
            NonRetryableGenerationFailed("x", session_id=SessionId(1), attempt=1, retryable=False),
            False,
        ),
    ],
)
def test_one_place_classifies_retry(error: Exception, retryable: bool) -> None:
    assert is_retryable(error) is retryable


DATABASE = {"JLG_DATABASE_URL": "postgresql://jlg@db.internal:5432/jlg"}
"""What production must name (the rest has defaults)."""


def test_settings_defaults() -> None:
    settings = Settings.from_env(DATABASE)
    assert settings.registrar is RegistrarKind.LOCAL
    assert settings.environment is Environment.PRODUCTION
    local = Settings.from_env({"JLG_ENVIRONMENT": "local"})
    assert local.database_url.startswith("postgresql+psycopg://")


def test_http_registrar_needs_url_and_token() -> None:
    with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_URL"):
        Settings.from_env({**DATABASE, "JLG_REGISTRAR": "http"})
    settings = Settings.from_env(
        {
            **DATABASE,
            "JLG_REGISTRAR": "HTTP",
            "JLG_ONLINE_SESSION_URL": "http://x",
            "JLG_ONLINE_SESSION_TOKEN": "t",
        }
    )
    assert settings.registrar is RegistrarKind.HTTP
    assert "online_session_token" not in repr(settings), "the token stays out of logs"


def test_burst_settings_default_to_sharing_when_many_wait_and_refuse_nonsense() -> None:
    settings = Settings.from_env(DATABASE)
    assert settings.run_sharing() == RunSharing(max_sessions_per_run=100, share_above=10)
    assert settings.generation_concurrency == 4
    one_each = Settings.from_env({**DATABASE, "JLG_MAX_SESSIONS_PER_RUN": "1"})
    assert one_each.run_sharing() == ONE_RUN_EACH
    always = Settings.from_env(
        {**DATABASE, "JLG_SHARE_RUNS_ABOVE": "0", "JLG_GENERATION_CONCURRENCY": "8"}
    )
    assert always.run_sharing() == RunSharing(100, share_above=0)
    assert always.generation_concurrency == 8
    for name, value in (
        ("JLG_MAX_SESSIONS_PER_RUN", "0"),
        ("JLG_MAX_SESSIONS_PER_RUN", "1001"),
        ("JLG_MAX_SESSIONS_PER_RUN", "many"),
        ("JLG_SHARE_RUNS_ABOVE", "-1"),
        ("JLG_SHARE_RUNS_ABOVE", "few"),
        ("JLG_GENERATION_CONCURRENCY", "0"),
        ("JLG_GENERATION_CONCURRENCY", "33"),
    ):
        with pytest.raises(ConfigError, match=name):
            Settings.from_env({**DATABASE, name: value})


def test_unknown_registrar_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="JLG_REGISTRAR must be one of"):
        Settings.from_env({**DATABASE, "JLG_REGISTRAR": "zoom"})


@pytest.mark.parametrize(
    ("raw", "value"), [("true", True), ("1", True), ("FALSE", False), ("", False), (None, False)]
)
def test_flags(raw: str | None, value: bool) -> None:
    assert parse_flag("ENABLE_X", raw) is value


def test_bad_flag_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="ENABLE_X"):
        parse_flag("ENABLE_X", "maybe")


def test_settings_read_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same variables through pydantic-settings' environment source as from a mapping."""
    env = {
        "JLG_ENVIRONMENT": "local",
        "JLG_DATABASE_URL": "postgresql://u@db:5432/jlg",
        "ENABLE_JOIN_LINK_SCHEDULER": "true",
        "AWS_SCHEDULER_TARGET_QUEUE_ARN": "arn:aws:sqs:eu-west-1:1:q",
        "AWS_SCHEDULER_EXECUTION_ROLE_ARN": "arn:aws:iam::1:role/r",
        "AWS_SCHEDULER_GROUP_NAME": "jlg",
        "AWS_REGION": "eu-west-1",
        "JLG_TEST_STALE_MS": "1500",
        "JLG_JWT_MAX_TTL_S": "600",
        "JLG_ONLINE_SESSION_TIMEOUT_S": "12.5",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    from_process, from_mapping = Settings.from_env(), Settings.from_env(env)
    for settings in (from_process, from_mapping):
        assert settings.database_url == "postgresql://u@db:5432/jlg"
        assert settings.scheduler_enabled
        assert settings.scheduler_target == ScheduleTarget(
            "arn:aws:sqs:eu-west-1:1:q", "arn:aws:iam::1:role/r", "jlg"
        )
        assert settings.aws_region == "eu-west-1"
        assert settings.windows.stale_ms == 1500
        assert (settings.jwt_max_ttl_s, settings.online_session_timeout_s) == (600, 12.5)


CONFIG_VARIABLES = [
    "JLG_ENVIRONMENT",
    "JLG_REGISTRAR",
    "JLG_JWT_MAX_TTL_S",
    "JLG_ONLINE_SESSION_TIMEOUT_S",
    "JLG_ONLINE_SESSION_RATE",
    "JLG_ONLINE_SESSION_BURST",
    "JLG_ONLINE_SESSION_MAX_PAUSE_S",
    "JLG_MAX_SESSIONS_PER_RUN",
    "JLG_TEST_GRACE_MS",
    "JLG_TEST_STALE_MS",
]


@pytest.mark.parametrize("name", CONFIG_VARIABLES)
def test_a_config_error_never_repeats_the_value(name: str) -> None:
    """The audit: ConfigError repeated a variable's value (a URL's password, a token typed
    into the wrong variable), and errors reach logs."""
    marker = "s3cr3t-pa55word"
    environ = {"JLG_ENVIRONMENT": "local", name: marker}
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(environ)
    assert marker not in str(refused.value)
    assert name in str(refused.value)


def test_a_flag_error_never_repeats_the_value() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_flag("ENABLE_JOIN_LINK_FALLBACK_CRON", "s3cr3t-pa55word")
    assert "s3cr3t" not in str(refused.value)
