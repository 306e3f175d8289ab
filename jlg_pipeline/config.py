"""Settings read from the environment (documented in ``.env.example``), checked once."""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from jlg_pipeline.domain.errors import ConfigError

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/jlg"


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


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    registrar: RegistrarKind = RegistrarKind.LOCAL
    online_session_url: str | None = None
    online_session_token: str | None = field(default=None, repr=False)

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
        settings = cls(
            database_url=env.get("JLG_DATABASE_URL") or DEFAULT_DATABASE_URL,
            registrar=registrar,
            online_session_url=env.get("JLG_ONLINE_SESSION_URL") or None,
            online_session_token=env.get("JLG_ONLINE_SESSION_TOKEN") or None,
        )
        if registrar is RegistrarKind.HTTP and not (
            settings.online_session_url and settings.online_session_token
        ):
            raise ConfigError(
                "JLG_REGISTRAR=http needs JLG_ONLINE_SESSION_URL and JLG_ONLINE_SESSION_TOKEN"
            )
        return settings
