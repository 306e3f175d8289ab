"""Alembic environment: the URL comes from the caller (``jlg migrate``), alembic.ini, or the
settings (JLG_DATABASE_URL)."""

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from jlg_pipeline.adapters.database import normalize_url
from jlg_pipeline.adapters.tables import metadata
from jlg_pipeline.config import Settings

config = context.config
target_metadata = metadata


def _url() -> str:
    url = (
        config.attributes.get("database_url")
        or config.get_main_option("sqlalchemy.url")
        or Settings.from_env().database_url
    )
    return normalize_url(url)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    # `jlg migrate --plan` collects the statements (jlg_pipeline/migrate.py); else stdout.
    output = {"output_buffer": config.attributes["output_buffer"]}
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        **(output if "output_buffer" in config.attributes else {}),
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given)
    else:
        engine = create_engine(_url(), poolclass=pool.NullPool)
        try:
            with engine.connect() as connection:
                _run(connection)
        finally:
            engine.dispose()
