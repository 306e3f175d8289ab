"""``jlg dev --online-session=<behaviour>``: the local stack registers over HTTP against the
shipped stand-in, which answers every call as asked, and the banner says which registrar is
active. Checked through the real HTTP registrar built from the environment jlg dev writes."""

import contextlib

import pytest
from sqlalchemy import Engine

from jlg_pipeline import bootstrap
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.errors import RegistrarRejected, RegistrarUnavailable
from jlg_pipeline.domain.models import BulkRegisterRequest
from jlg_pipeline.local.stack import _registrar


def _call(env: dict[str, str], engine: Engine) -> object:
    settings = Settings.from_env({**env, "JLG_DATABASE_URL": "postgresql://unused/db"})
    with bootstrap.build_registrar(
        settings.registrar,
        engine,
        url=settings.online_session_url,
        token=settings.online_session_token,
        timeout_s=5,
    ) as registrar:
        return registrar.bulk_register(BulkRegisterRequest(1, idempotency_key="join-link-1@x"))


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
