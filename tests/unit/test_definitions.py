"""The Dagster composition root: every job, sensor and schedule resolves with its resources,
the registrar is chosen per deployment, and secrets stay EnvVars (never shown in the UI)."""

import pytest
from dagster import DefaultSensorStatus, Definitions

from jlg_pipeline.definitions import build_definitions, build_resources
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.orchestration.resources import http_registrar, local_registrar

LOCAL = {"JLG_DATABASE_URL": "postgresql://x@127.0.0.1:1/x"}
HTTP = {
    **LOCAL,
    "JLG_REGISTRAR": "http",
    "JLG_ONLINE_SESSION_URL": "http://127.0.0.1:9",
    "JLG_ONLINE_SESSION_TOKEN": "svc-token",
    "JLG_ONLINE_SESSION_TIMEOUT_S": "30",
    "JLG_SQS_QUEUE_URL": "http://127.0.0.1:9/q",
}


@pytest.mark.parametrize("environ", [LOCAL, HTTP], ids=["local", "http"])
def test_every_job_sensor_and_schedule_resolves(environ: dict[str, str]) -> None:
    defs = build_definitions(environ)
    Definitions.validate_loadable(defs)
    for job in (
        "join_link_generation_job",
        "join_link_fallback_sweep_job",
        "join_link_backfill_job",
        "join_link_schedule_sync_job",
        "join_link_dagster_prune_job",
    ):
        assert defs.resolve_job_def(job).name == job
    prune = defs.resolve_schedule_def("join_link_dagster_prune_schedule")
    assert (prune.job_name, prune.execution_timezone) == ("join_link_dagster_prune_job", "UTC")
    assert defs.resolve_sensor_def("join_link_sqs_sensor").job_name == "join_link_generation_job"
    sync_sensor = defs.resolve_sensor_def("join_link_schedule_sync_sensor")
    assert {j.name for j in sync_sensor.jobs} == {
        "join_link_schedule_sync_job",
        "join_link_generation_job",
    }
    assert sync_sensor.default_status is DefaultSensorStatus.RUNNING
    assert defs.resolve_schedule_def("join_link_fallback_schedule").job_name == (
        "join_link_fallback_sweep_job"
    )


def test_the_registrar_is_chosen_per_deployment() -> None:
    assert build_resources(LOCAL)["registrar"] is local_registrar
    http = build_resources(HTTP)["registrar"]
    assert http.description == http_registrar.description
    # What the UI shows as the resource's config names the variables, not their values.
    configured = http.config_schema._invoke_user_config_fn({})["config"]
    assert configured["token"] == {"env": "JLG_ONLINE_SESSION_TOKEN"}
    assert configured["url"] == {"env": "JLG_ONLINE_SESSION_URL"}
    assert configured["timeout_s"] == 30.0


def test_a_deployment_without_a_queue_loads() -> None:
    assert build_resources(LOCAL)["sqs_queue"].queue_url is None


def test_an_unusable_configuration_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_TOKEN"):
        build_resources({**LOCAL, "JLG_REGISTRAR": "http", "JLG_ONLINE_SESSION_URL": "http://x"})
    with pytest.raises(ConfigError, match="JLG_TEST_STALE_MS"):
        build_resources({**LOCAL, "JLG_TEST_STALE_MS": "5"})


def test_sharing_points_the_sensors_at_the_shared_job() -> None:
    """JLG_MAX_SESSIONS_PER_RUN is read when the code location loads: above 1 the SQS sensor
    and the sync sensor's direct launches ask for shared runs; the runs get the concurrency."""
    defs = build_definitions(
        {**LOCAL, "JLG_MAX_SESSIONS_PER_RUN": "25", "JLG_GENERATION_CONCURRENCY": "6"}
    )
    Definitions.validate_loadable(defs)
    assert defs.resolve_sensor_def("join_link_sqs_sensor").job_name == (
        "join_link_shared_generation_job"
    )
    sync_sensor = defs.resolve_sensor_def("join_link_schedule_sync_sensor")
    assert {j.name for j in sync_sensor.jobs} == {
        "join_link_schedule_sync_job",
        "join_link_shared_generation_job",
    }
    assert (
        build_resources({**LOCAL, "JLG_GENERATION_CONCURRENCY": "6"})["database"].concurrency == 6
    )
