"""Start-up refusals and local files (docs/design.md "Security"), without I/O beyond tmp_path."""

import os
import stat
import string
import tomllib
from pathlib import Path

import jwt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devstack import stack, system
from jlg_pipeline import cli
from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.config import (
    DEFAULT_DATABASE_URL,
    EXAMPLE_JWT_SECRET,
    Environment,
    Settings,
    timing_windows,
)
from jlg_pipeline.domain.errors import ConfigError
from tests.support import ROOT
from web.app import create_app
from web.server import client_key


def test_the_example_secret_is_the_one_in_env_example() -> None:
    assert f"JLG_JWT_SECRET={EXAMPLE_JWT_SECRET}\n" in (ROOT / ".env.example").read_text()


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("short", "at least 32 bytes"),
        ("a" * 32, "distinct"),
        ("password" * 4, "distinct"),
        ("012345678" * 4, "distinct"),
        (EXAMPLE_JWT_SECRET, "placeholder"),
    ],
)
def test_weak_jwt_secrets_refuse_to_start(secret: str, message: str) -> None:
    settings = Settings(
        database_url="postgresql://x@127.0.0.1:1/x",
        jwt_secret=secret,
        environment=Environment.LOCAL,
    )
    with pytest.raises(ConfigError, match=message):
        create_app(settings)


STRONG = "Kq3v-8Zt_wP1mXa9" * 2


def test_a_strong_secret_starts_with_an_issuer_and_an_audience() -> None:
    create_app(
        Settings(
            database_url="postgresql://x@127.0.0.1:1/x",
            jwt_secret=STRONG,
            jwt_issuer="https://idp.example",
            jwt_audience="jlg-admin-api",
        )
    )


@pytest.mark.parametrize(
    "missing", [{}, {"jwt_issuer": "https://idp.example"}, {"jwt_audience": "jlg-admin-api"}]
)
def test_production_refuses_to_start_without_an_issuer_and_an_audience(
    missing: dict[str, str],
) -> None:
    """Without them, a token the same IdP key signed for another service would be taken."""
    settings = Settings(
        database_url="postgresql://x@127.0.0.1:1/x",
        jwt_secret=STRONG,
        environment=Environment.PRODUCTION,
    ).model_copy(update=missing)
    with pytest.raises(ConfigError, match="JLG_JWT_ISSUER and JLG_JWT_AUDIENCE"):
        create_app(settings)
    create_app(settings.model_copy(update={"environment": Environment.LOCAL}))


DATABASE = {"JLG_DATABASE_URL": "postgresql://jlg:pw@db.internal:5432/jlg"}
LOCAL = {"JLG_ENVIRONMENT": "local"}


def test_the_environment_is_production_unless_said() -> None:
    assert Settings.from_env(DATABASE).environment is Environment.PRODUCTION
    assert Settings.from_env({"JLG_ENVIRONMENT": " Local "}).environment is Environment.LOCAL
    with pytest.raises(
        ConfigError, match=r"JLG_ENVIRONMENT must be one of \['production', 'local'\]"
    ):
        Settings.from_env({"JLG_ENVIRONMENT": "staging"})


@pytest.mark.parametrize("name", ["JLG_TEST_STALE_MS", "JLG_TEST_GRACE_MS"])
@pytest.mark.parametrize("value", ["0", "1", "999"])
def test_test_windows_under_a_second_are_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be at least 1000 ms"):
        timing_windows({name: value})
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({**LOCAL, name: value})


def test_test_windows_from_a_second_are_accepted() -> None:
    windows = timing_windows({"JLG_TEST_STALE_MS": "1000", "JLG_TEST_GRACE_MS": "2500"})
    assert (windows.stale_ms, windows.grace_ms) == (1000, 2500)


@pytest.mark.parametrize(
    ("raw", "ok"), [("300", True), ("0.5", True), ("0", False), ("-1", False), ("nan", False)]
)
def test_online_session_timeout_is_a_positive_number(raw: str, ok: bool) -> None:
    env = {**DATABASE, "JLG_ONLINE_SESSION_TIMEOUT_S": raw}
    if ok:
        assert Settings.from_env(env).online_session_timeout_s == float(raw)
    else:
        with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_TIMEOUT_S"):
            Settings.from_env(env)


@pytest.mark.parametrize(
    "name", ["JLG_TEST_GRACE_MS", "JLG_TEST_STALE_MS", "JLG_TEST_WATCHDOG_GRACE_MS"]
)
def test_production_refuses_the_knobs_for_tests_by_name(name: str) -> None:
    """A stale window of a second makes every running generation reclaimable."""
    with pytest.raises(ConfigError, match=f"{name} is for tests only"):
        Settings.from_env({**DATABASE, name: "1000"})
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({**DATABASE, "JLG_ENVIRONMENT": "Production", name: "60000"})
    assert Settings.from_env({**DATABASE, **LOCAL, name: "1000"}).environment is Environment.LOCAL


def test_production_needs_its_database_named() -> None:
    """The built-in URL is a superuser on this machine: never a production's choice."""
    with pytest.raises(ConfigError, match="JLG_DATABASE_URL must be set in production"):
        Settings.from_env({})
    with pytest.raises(ConfigError, match="JLG_DATABASE_URL must be set in production"):
        Settings.from_env({"JLG_DATABASE_URL": "   "})
    assert Settings.from_env(LOCAL).database_url == DEFAULT_DATABASE_URL
    assert Settings.from_env(DATABASE).database_url == DATABASE["JLG_DATABASE_URL"]


def test_jlg_token_stays_a_local_tool_and_migrate_takes_its_url_from_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("JLG_ENVIRONMENT", "JLG_DATABASE_URL", "JLG_JWT_SECRET", "JLG_JWT_PUBLIC_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JLG_JWT_SECRET", STRONG)
    assert cli.main(["token"]) == 0
    assert capsys.readouterr().out.count(".") == 2, "a JWT"
    assert cli.main(["migrate", "--plan"]) == 2
    assert "JLG_DATABASE_URL must be set in production" in capsys.readouterr().err


SECRETS = st.text(alphabet=string.ascii_letters + string.digits, min_size=12, max_size=40)


@given(password=SECRETS, token=SECRETS, key=SECRETS)
def test_no_secret_shows_in_a_repr_or_an_error(password: str, token: str, key: str) -> None:
    env = {
        "JLG_DATABASE_URL": f"postgresql://jlg:{password}@db.internal:5432/jlg",
        "JLG_DAGSTER_READER_URL": f"postgresql://reader:{password}@dagster-db/dagster",
        "JLG_REGISTRAR": "http",
        "JLG_ONLINE_SESSION_URL": f"https://svc:{password}@online.internal",
        "JLG_ONLINE_SESSION_TOKEN": token,
        "JLG_JWT_SECRET": key + STRONG,
    }
    settings = Settings.from_env(env)
    for shown in (repr(settings), str(settings)):
        assert password not in shown
        assert token not in shown
        assert key not in shown
    for name in ("JLG_DATABASE_URL", "JLG_DAGSTER_READER_URL", "JLG_ONLINE_SESSION_URL"):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({**env, name: ["not", "a", "string", password]})  # type: ignore[dict-item]
        assert password not in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        normalize_url(f"mysql://jlg:{password}@db/jlg")
    assert password not in str(refused.value)


HTTP = {
    **DATABASE,
    "JLG_REGISTRAR": "http",
    "JLG_ONLINE_SESSION_URL": "http://online-session.internal",
    "JLG_ONLINE_SESSION_TOKEN": "svc-token",
}


def test_a_bulk_register_call_is_bounded_under_half_the_stale_window() -> None:
    """The call only dispatches a job, and one abandoned at its bound is asked again under
    the cycle's key: 30 s by default (it was 300 s), never as long as half the stale window."""
    assert Settings.from_env(HTTP).online_session_timeout_s == 30.0
    assert Settings.from_env({**HTTP, "JLG_ONLINE_SESSION_TIMEOUT_S": "899.5"})
    with pytest.raises(ConfigError, match=r"under half the stale window \(900 s\), got 900"):
        Settings.from_env({**HTTP, "JLG_ONLINE_SESSION_TIMEOUT_S": "900"})
    short = {**HTTP, **LOCAL, "JLG_TEST_STALE_MS": "6000"}
    with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_TIMEOUT_S must be under"):
        Settings.from_env(short)
    assert Settings.from_env({**short, "JLG_ONLINE_SESSION_TIMEOUT_S": "2.9"})
    # The embedded registrar calls no service: the bound is not its business.
    assert Settings.from_env({**LOCAL, "JLG_TEST_STALE_MS": "1000"}).online_session_timeout_s


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_local_stack_files_are_private_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JLG_JWT_SECRET", raising=False)
    old = os.umask(0o022)
    try:
        data = system.private_dir(tmp_path / ".data")
        logs = system.private_dir(data / "logs")
        with system.private_file(logs / "web.log", os.O_WRONLY | os.O_APPEND) as log:
            assert _mode(logs / "web.log") == 0o600, "private while still empty"
            log.write(b"line\n")
        secret = stack._jwt_secret(data)
    finally:
        os.umask(old)
    assert (_mode(data), _mode(logs)) == (0o700, 0o700)
    assert _mode(logs / "web.log") == 0o600
    assert _mode(data / "dev-jwt-secret") == 0o600
    assert len(secret) >= 32
    assert len(set(secret)) >= 10
    assert stack._jwt_secret(data) == secret, "kept across restarts"


def test_an_open_data_folder_left_by_an_older_version_is_tightened(tmp_path: Path) -> None:
    (tmp_path / ".data").mkdir(mode=0o755)
    (tmp_path / ".data").chmod(0o755)
    assert _mode(system.private_dir(tmp_path / ".data")) == 0o700


@pytest.mark.parametrize(
    ("raw", "ok"),
    [("0", True), ("4", True), ("20", True), ("21", False), ("-1", False), ("x", False)],
)
def test_sqs_wait_is_within_what_sqs_allows(raw: str, ok: bool) -> None:
    if ok:
        assert Settings.from_env({**DATABASE, "JLG_SQS_WAIT_S": raw}).sqs_wait_s == int(raw)
    else:
        with pytest.raises(ConfigError, match="JLG_SQS_WAIT_S"):
            Settings.from_env({**DATABASE, "JLG_SQS_WAIT_S": raw})


def test_jlg_token_uses_the_dev_stack_secret_when_none_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "Kq3v-8Zt_wP1mXa9" * 3
    (tmp_path / ".data").mkdir()
    (tmp_path / ".data" / "dev-jwt-secret").write_text(secret)
    (tmp_path / "devstack").symlink_to(ROOT / "devstack")
    monkeypatch.delenv("JLG_JWT_SECRET", raising=False)
    monkeypatch.delenv("JLG_JWT_PUBLIC_KEY", raising=False)
    monkeypatch.setattr(cli, "REPOSITORY_ROOT", tmp_path)
    assert cli.main(["token", "--roles", "mentor", "--user-id", "2"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), secret, algorithms=["HS256"])
    assert (claims["sub"], claims["roles"]) == ("2", ["mentor"])


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:192.0.2.7", "192.0.2.0/24"),
        ("192.0.2.7", "192.0.2.0/24"),
        ("192.0.2.255", "192.0.2.0/24"),
        ("192.0.3.7", "192.0.3.0/24"),
        ("fe80::1%eth0", "fe80::/64"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_the_per_client_cap_counts_a_network_as_one_client(address: str, key: str) -> None:
    """The audits: every address of one IPv6 /64 was another client, and so was every IPv4
    alias of one host (8 loopback aliases filled the global cap)."""
    assert client_key(address) == key


def test_jlg_version_prints_the_packages_version(capsys: pytest.CaptureFixture[str]) -> None:
    """The version an operator reads off a running image is the one pyproject.toml names
    (and the CHANGELOG's release)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"jlg {declared}"
