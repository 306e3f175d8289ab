"""The local tools: ``jlg dev --online-session=<behaviour>`` registers over HTTP against the
shipped stand-in, which answers every call as asked (checked through the real HTTP registrar
built from the environment jlg dev writes), and the banner says which registrar is active;
the dev.env it writes, its port check, and ``jlg token``'s limits."""

import contextlib
import socket
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from devstack.online_session import BEHAVIOURS
from devstack.ports import require_free
from devstack.stack import _registrar, write_dev_env
from jlg_pipeline import bootstrap, cli
from jlg_pipeline.cli import main
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.validation import SessionId
from tests.support.web import SECRET


def _call(env: dict[str, str], engine: Engine) -> object:
    settings = Settings.from_env({**env, "JLG_DATABASE_URL": "postgresql://unused/db"})
    with bootstrap.build_registrar(
        settings.registrar,
        engine,
        url=settings.online_session_url,
        token=settings.online_session_token,
        timeout_s=5,
    ) as registrar:
        return registrar.bulk_register(
            BulkRegisterRequest(SessionId(1), idempotency_key="join-link-1@x")
        )


@pytest.mark.parametrize(
    ("behaviour", "error", "shown"),
    [
        ("reject", RegistrarRejected, "MEETING_DELETED"),
        ("throttle", RegistrarUnavailable, "429"),
        ("flaky", RegistrarUnavailable, "503"),
        ("down", RegistrarUnavailable, "ConnectError"),
    ],
)
def test_each_misbehaviour_reaches_the_registrar_as_its_error(
    engine: Engine, behaviour: str, error: type[Exception], shown: str
) -> None:
    env: dict[str, str] = {}
    with contextlib.ExitStack() as resources:
        banner = _registrar(env, behaviour, resources)
        assert env["JLG_REGISTRAR"] == "http"
        assert f"answering '{behaviour}'" in banner
        assert env["JLG_ONLINE_SESSION_URL"] in banner
        with pytest.raises(error, match=shown) as raised:
            _call(env, engine)
    if behaviour == "throttle":
        assert isinstance(raised.value, RegistrarUnavailable)
        assert raised.value.retry_after_s == 30


def test_ok_answers_a_job_and_without_a_behaviour_the_local_registrar_stays(engine: Engine) -> None:
    env: dict[str, str] = {}
    with contextlib.ExitStack() as resources:
        _registrar(env, "ok", resources)
        result = _call(env, engine)
    assert getattr(result, "job_id", "").startswith("job-1-")
    untouched: dict[str, str] = {}
    assert _registrar(untouched, None, contextlib.ExitStack()).startswith("local")
    assert untouched == {}


def test_jlg_dev_offers_every_behaviour_of_the_stand_in() -> None:
    """The CLI names the behaviours without importing the development stack (the image has
    none); this keeps the two lists one."""
    assert tuple(BEHAVIOURS) == cli.ONLINE_SESSION_BEHAVIOURS


def test_dev_env_carries_the_registrar_token(tmp_path: Path) -> None:
    path = tmp_path / "dev.env"
    write_dev_env(
        path,
        {
            "JLG_REGISTRAR": "http",
            "JLG_ONLINE_SESSION_URL": "http://127.0.0.1:9/",
            "JLG_ONLINE_SESSION_TOKEN": "a-token",
        },
    )
    assert "export JLG_ONLINE_SESSION_TOKEN=a-token" in path.read_text()


def test_a_port_in_time_wait_counts_as_free() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its port goes to TIME_WAIT
    time.sleep(0.1)
    client.close()
    server.close()
    require_free(port, "the moto server")


def test_jlg_token_refuses_a_lifetime_the_api_would_refuse(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JLG_JWT_SECRET", SECRET)
    assert main(["token", "--ttl", "999999"]) == 2
    assert "--ttl must be from 1 to 86400" in capsys.readouterr().err
    assert main(["token", "--ttl", "3600"]) == 0
