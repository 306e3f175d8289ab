"""Builds the adapters from settings; entry points call this, nothing connects at import."""

from sqlalchemy import Engine

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.registrars.local import LocalRegistrar
from jlg_pipeline.config import RegistrarKind, Settings


def build_registrar(settings: Settings, engine: Engine) -> BulkRegistrar:
    """The registrar ``JLG_REGISTRAR`` selects: ``local`` (default) or ``http``."""
    if settings.registrar is RegistrarKind.HTTP:
        # Imported here: the local registrar, the default, has no use for an HTTP client.
        from jlg_pipeline.adapters.registrars.http import HttpRegistrar

        return HttpRegistrar(
            settings.online_session_url or "",
            settings.online_session_token or "",
            timeout_s=settings.online_session_timeout_s,
        )
    return LocalRegistrar(engine)
