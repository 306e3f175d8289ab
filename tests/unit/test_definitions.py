"""The Dagster composition root: every job, sensor and schedule resolves with its resources,
the registrar is chosen per deployment, and secrets stay EnvVars (never shown in the UI)."""

from typing import Any

import pytest
from dagster import DefaultSensorStatus, Definitions, EnvVar

from jlg_pipeline.config import Settings
from jlg_pipeline.definitions import build_definitions, build_resources
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.orchestration.resources import RegistrarResource

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


def _resources(environ: dict[str, str]) -> dict[str, Any]:
    return build_resources(Settings.from_env(environ))


def test_the_registrar_is_chosen_per_deployment() -> None:
    local = _resources(LOCAL)["registrar"]
    assert isinstance(local, RegistrarResource)
    assert (local.kind, local.url, local.token) == ("local", None, None)
    http = _resources(HTTP)["registrar"]
    assert isinstance(http, RegistrarResource)
    assert http.kind == "http"
    assert http.timeout_s == 30.0
    # The resource's config names the variables (resolved in the run), never their values.
    assert isinstance(http.token, EnvVar)
    assert (http.token, http.url) == ("JLG_ONLINE_SESSION_TOKEN", "JLG_ONLINE_SESSION_URL")


def test_the_schedule_sync_resource_gets_the_settings_target_region_and_endpoint() -> None:
    sync = _resources(
        {
            **LOCAL,
            "AWS_SCHEDULER_TARGET_QUEUE_ARN": "arn:aws:sqs:eu-west-1:1:q",
            "AWS_SCHEDULER_EXECUTION_ROLE_ARN": "arn:aws:iam::1:role/r",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        }
    )["schedule_sync"]
    assert sync.model_dump() == {
        "database": sync.model_dump()["database"],
        "queue_arn": "arn:aws:sqs:eu-west-1:1:q",
        "role_arn": "arn:aws:iam::1:role/r",
        "group_name": "default",
        "aws_region": "eu-west-1",
        "aws_endpoint_url": "http://127.0.0.1:9",
    }


def test_a_deployment_without_a_queue_loads() -> None:
    assert _resources(LOCAL)["sqs_queue"].queue_url is None


def test_an_unusable_configuration_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_TOKEN"):
        build_definitions({**LOCAL, "JLG_REGISTRAR": "http", "JLG_ONLINE_SESSION_URL": "http://x"})
    with pytest.raises(ConfigError, match="JLG_TEST_STALE_MS"):
        build_definitions({**LOCAL, "JLG_TEST_STALE_MS": "5"})


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
    assert _resources({**LOCAL, "JLG_GENERATION_CONCURRENCY": "6"})["database"].concurrency == 6
