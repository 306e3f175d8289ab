"""The Dagster composition root: every job, sensor and schedule resolves with its resources,
the registrar is chosen per deployment, and no resource takes config a run could set."""

import importlib.util
import itertools
import re
from pathlib import Path

import pytest
from dagster import (
    DagsterInvalidConfigError,
    DefaultSensorStatus,
    Definitions,
    ResourceDefinition,
    validate_run_config,
)
from dagster import build_resources as dagster_build_resources

from jlg_pipeline.config import DEFAULT_SQS_SENSOR_INTERVAL_S, Settings
from jlg_pipeline.definitions import build_definitions
from jlg_pipeline.domain.constants import WATCHDOG_INTERVAL_S
from jlg_pipeline.domain.errors import ConfigError
from jlg_pipeline.orchestration.resources import build_resources
from jlg_pipeline.orchestration.schedule_sync import SYNC_SENSOR_INTERVAL_S

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
    assert {j.name for j in defs.resolve_sensor_def("join_link_sqs_sensor").jobs} == {
        "join_link_generation_job",
        "join_link_shared_generation_job",
    }
    sync_sensor = defs.resolve_sensor_def("join_link_schedule_sync_sensor")
    assert {j.name for j in sync_sensor.jobs} == {
        "join_link_schedule_sync_job",
        "join_link_generation_job",
        "join_link_shared_generation_job",
    }
    assert sync_sensor.default_status is DefaultSensorStatus.RUNNING
    assert defs.resolve_schedule_def("join_link_fallback_schedule").job_name == (
        "join_link_fallback_sweep_job"
    )


def _resources(environ: dict[str, str]) -> dict[str, ResourceDefinition]:
    return build_resources(Settings.from_env(environ))


ATTACKS = [
    {"kind": "http", "url": "http://attacker.invalid", "token": {"env": "JLG_JWT_SECRET"}},
    {"url": "postgresql://attacker.invalid/x"},
    {"queue_arn": "arn:aws:sqs:eu-west-1:1:other", "role_arn": "arn:aws:iam::1:role/r"},
    {"aws_endpoint_url": "http://attacker.invalid"},
    {"queue_url": "http://attacker.invalid/q"},
    {"token": "x"},
]


@pytest.mark.parametrize("environ", [LOCAL, HTTP], ids=["local", "http"])
def test_no_resource_takes_run_config(environ: dict[str, str]) -> None:
    """The Dagster UI has no login and takes resource config as run config: every resource's
    config schema is empty, so Dagster's own check refuses a run config that would point a
    resource elsewhere (a URL, a token, an ARN, the database, the registrar kind)."""
    defs = build_definitions(environ)
    jobs = [
        "join_link_generation_job",
        "join_link_shared_generation_job",
        "join_link_fallback_sweep_job",
        "join_link_backfill_job",
        "join_link_schedule_sync_job",
        "join_link_dagster_prune_job",
    ]
    checked = 0
    for name in jobs:
        job_def = defs.resolve_job_def(name)
        for key in set(job_def.resource_defs) - {"io_manager"}:
            for attack in ATTACKS:
                with pytest.raises(
                    DagsterInvalidConfigError,
                    match=f"unexpected config entr[^\\n]*root:resources:{key}:config",
                ):
                    validate_run_config(job_def, {"resources": {key: {"config": attack}}})
                checked += 1
    assert checked >= len(jobs) * len(ATTACKS)


def test_the_registrar_is_chosen_per_deployment() -> None:
    assert "local registrar" in (_resources(LOCAL)["registrar"].description or "")
    assert "http registrar" in (_resources(HTTP)["registrar"].description or "")


def test_the_resources_hand_out_the_settings() -> None:
    environ = {
        **HTTP,
        "JLG_GENERATION_CONCURRENCY": "6",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    }
    with dagster_build_resources(_resources(environ)) as built:
        assert built.database.concurrency == 6
        assert built.sqs_queue.queue_url == "http://127.0.0.1:9/q"
        assert (built.sqs_queue.aws_region, built.sqs_queue.aws_endpoint_url) == (
            "eu-west-1",
            "http://127.0.0.1:9",
        )
    with dagster_build_resources({"sqs_queue": _resources(LOCAL)["sqs_queue"]}) as built:
        assert built.sqs_queue.queue_url is None


def test_an_unusable_configuration_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="JLG_ONLINE_SESSION_TOKEN"):
        build_definitions({**LOCAL, "JLG_REGISTRAR": "http", "JLG_ONLINE_SESSION_URL": "http://x"})
    with pytest.raises(ConfigError, match="JLG_TEST_STALE_MS"):
        build_definitions({**LOCAL, "JLG_TEST_STALE_MS": "5"})


def test_both_sensors_may_ask_for_either_generation_job() -> None:
    """JLG_MAX_SESSIONS_PER_RUN is read when the code location loads: the SQS sensor and the
    sync sensor's direct launches ask for single or shared runs, tick by tick; the runs get
    the concurrency."""
    defs = build_definitions(
        {**LOCAL, "JLG_MAX_SESSIONS_PER_RUN": "25", "JLG_GENERATION_CONCURRENCY": "6"}
    )
    Definitions.validate_loadable(defs)
    generation = {"join_link_generation_job", "join_link_shared_generation_job"}
    assert {j.name for j in defs.resolve_sensor_def("join_link_sqs_sensor").jobs} == generation
    sync_sensor = defs.resolve_sensor_def("join_link_schedule_sync_sensor")
    assert {j.name for j in sync_sensor.jobs} == {"join_link_schedule_sync_job", *generation}


DAEMON_LOOKS_EVERY_S = 5
"""Dagster's sensor daemon's loop (``MIN_INTERVAL_LOOP_TIME``), which orchestration/sensor_ticks.py
counts on: read from the installed Dagster below."""


@pytest.mark.parametrize(
    ("sensor", "every_s"),
    [
        ("join_link_watchdog_sensor", WATCHDOG_INTERVAL_S),
        ("join_link_sqs_sensor", DEFAULT_SQS_SENSOR_INTERVAL_S),
        ("join_link_schedule_sync_sensor", SYNC_SENSOR_INTERVAL_S),
    ],
)
@pytest.mark.parametrize("late_s", [0.001, 0.2, 0.9])
def test_each_sensor_ticks_as_often_as_it_means(sensor: str, every_s: int, late_s: float) -> None:
    """Dagster's sensor daemon looks every DAEMON_LOOKS_EVERY_S seconds and evaluates a
    sensor whose last tick began at least its ``minimum_interval_seconds`` before; the tick
    begins a moment (``late_s``) after the look. A sensor asking for exactly the loop's 5 s
    was just under it at every other look: the watchdog ticked 10 s apart and launched a
    worker 10 s after a pause was cleared (bench.timing.service_budget, on-time-first)."""
    minimum = build_definitions(LOCAL).resolve_sensor_def(sensor).minimum_interval_seconds
    assert minimum is not None
    loop = DAEMON_LOOKS_EVERY_S
    ticks = [late_s]
    for look in range(loop, 12 * loop, loop):
        if look - ticks[-1] >= minimum:
            ticks.append(look + late_s)
    spacings = {round(later - earlier, 6) for earlier, later in itertools.pairwise(ticks)}
    assert spacings == {float(max(every_s, loop))}


def test_the_sensor_daemons_loop_is_the_one_the_sensors_count_on() -> None:
    """Read from the installed Dagster's source, not imported (its private modules change in
    any release): a release that changes the loop fails here, not in a bench."""
    spec = importlib.util.find_spec("dagster")
    assert spec is not None
    assert spec.origin is not None
    source = (Path(spec.origin).parent / "_daemon" / "sensor.py").read_text()
    loop = re.search(r"^MIN_INTERVAL_LOOP_TIME = (\d+)$", source, re.MULTILINE)
    assert loop is not None
    assert int(loop.group(1)) == DAEMON_LOOKS_EVERY_S
