"""The code location's resources for a test: built from Settings as ``definitions.py`` builds
them, with the test's database, queue and knobs."""

from dagster import ResourceDefinition, job

from jlg_pipeline.config import Settings
from jlg_pipeline.orchestration import resources


def settings_for(db_url: str = "", **environ: str) -> Settings:
    """The code location's settings in a test: a local environment (JLG_TEST_* allowed)."""
    given = {"JLG_ENVIRONMENT": "local", **environ}
    return Settings.from_env({"JLG_DATABASE_URL": db_url, **given} if db_url else given)


def database(db_url: str, **environ: str) -> ResourceDefinition:
    """``environ`` as the code location's: JLG_GENERATION_CONCURRENCY, JLG_TEST_*_MS, …"""
    return resources.database_resource(settings_for(db_url, **environ))


def database_scheduler_on(db_url: str, **environ: str) -> ResourceDefinition:
    """:func:`database` with ENABLE_JOIN_LINK_SCHEDULER on, as the code location reads it
    when it loads: the sensors of the real-time path and the watchdog act (unless ``environ``
    turns it off)."""
    return database(db_url, **{"ENABLE_JOIN_LINK_SCHEDULER": "true", **environ})


def sqs_queue(queue_url: str, visibility_timeout_seconds: int = 120) -> ResourceDefinition:
    return resources.sqs_queue_resource(
        settings_for(JLG_SQS_QUEUE_URL=queue_url, JLG_SQS_WAIT_S="0"), visibility_timeout_seconds
    )


@job
def placeholder_job() -> None:
    """Stands in for any job when a test only needs its runs to exist, not to run."""
