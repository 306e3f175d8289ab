"""Whatever lands on the queue, the real SQS sensor (moto SQS, a Dagster instance on
PostgreSQL) never fails a tick: every message ends in a run or is dropped with its reason,
one message at a time, and every valid message gets its run. Hypothesis draws the messages:
valid ones, valid ones with one field replaced by any JSON value, any JSON, any text."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, SensorResult, SkipReason, build_sensor_context
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jlg_pipeline.domain.constants import BIGINT_MAX, INT_MAX, MAX_REGISTRAR_BATCH_SIZE
from jlg_pipeline.domain.run_sharing import ONE_RUN_EACH, RunSharing
from jlg_pipeline.orchestration.generation_runs import covering
from jlg_pipeline.orchestration.sqs_events import build_sqs_sensor
from jlg_pipeline.orchestration.tags import RUN_KEY_TAG
from tests.support import ROOT
from tests.support.resources import database_scheduler_on as database
from tests.support.resources import placeholder_job, sqs_queue
from tests.support.web import Aws

# The reference: what a valid message is, written from the contract (docs/design.md "SQS
# message"), not from the code under test.
printable = st.characters(exclude_categories=("Cc", "Cs"))
valid_text = st.text(printable, min_size=1, max_size=64).filter(str.strip)
valid_data = st.fixed_dictionaries(
    {"programSessionId": st.integers(1, BIGINT_MAX)},
    optional={
        "role": st.none() | valid_text,
        "batchSize": st.none() | st.integers(1, MAX_REGISTRAR_BATCH_SIZE),
        "actorUserId": st.none() | st.integers(1, INT_MAX),
    },
)
valid_message = st.fixed_dictionaries(
    {"queueType": st.just("EVENT"), "subType": st.just("JOIN_LINK_GENERATION"), "data": valid_data},
    optional={"correlationId": valid_text, "timestamp": st.just("2026-12-03T09:00:00.000Z")},
)
# Whitespace of every kind and control characters, which a plain text strategy seldom draws.
EDGES = " \t\n\x00\x1c\x1f\x7f\x85\x9f\u00a0\u2000\u2028\u205f\u3000"
hostile_text = st.text(st.sampled_from(EDGES) | st.characters(codec="utf-8"), max_size=20)
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
FIELDS = [
    ("data", "programSessionId"),
    ("data", "role"),
    ("data", "batchSize"),
    ("data", "actorUserId"),
    (None, "correlationId"),
    (None, "timestamp"),
    (None, "queueType"),
    (None, "data"),
]


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    message = draw(valid_message)
    where, key = draw(st.sampled_from(FIELDS))
    target: dict[str, Any] = message["data"] if where else message  # type: ignore[assignment]
    target[key] = draw(st.text(st.sampled_from(EDGES), min_size=1, max_size=3) | any_json)
    return message


def _probe(data: dict[str, Any], **envelope: Any) -> tuple[str, None]:
    message = {"queueType": "EVENT", "subType": "JOIN_LINK_GENERATION", "data": data}
    return json.dumps({**message, **envelope}), None


# What the attacker's probe sent: each stopped every tick before.
PROBES = [
    _probe({"programSessionId": 4, "role": "   "}),
    _probe({"programSessionId": 4, "role": "\u3000"}),
    _probe({"programSessionId": 4, "role": "\x1f"}),
    _probe({"programSessionId": 4, "role": "men\x00tor"}),
    _probe({"programSessionId": 4}, correlationId="join-link-4\x00"),
]
body = st.one_of(
    valid_message.map(lambda m: (json.dumps(m), True)),
    mutated().map(lambda m: (json.dumps(m), None)),
    mutated().map(lambda m: (json.dumps(m), None)),
    any_json.map(lambda v: (json.dumps(v), None)),
    # SQS takes printable text only; JSON escapes the rest.
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=60).map(
        lambda t: (t, None)
    ),
)


@pytest.fixture
def instance(dagster_storage_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_storage_url)
    with DagsterInstance.from_config(str(tmp_path)) as dagster_instance:
        yield dagster_instance


@pytest.mark.parametrize(
    "sharing",
    [ONE_RUN_EACH, RunSharing(25, share_above=0), RunSharing()],
    ids=["one-run-per-message", "shared", "defaults"],
)
def test_no_message_fails_a_tick_and_every_valid_one_gets_its_run(
    aws: Aws, db_url: str, instance: DagsterInstance, sharing: RunSharing
) -> None:
    sensor = build_sqs_sensor(5, sharing)
    resources = {"sqs_queue": sqs_queue(aws.queue_url), "database": database(db_url)}
    state: dict[str, str | None] = {"cursor": None}

    def tick() -> SensorResult | SkipReason:
        with build_sensor_context(
            instance=instance, cursor=state["cursor"], resources=resources
        ) as context:
            result = sensor(context)
        assert isinstance(result, SensorResult | SkipReason)
        if isinstance(result, SensorResult):
            state["cursor"] = result.cursor
        return result

    @settings(
        max_examples=50,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(body, min_size=1, max_size=8))
    @example([(json.dumps({**json.loads(PROBES[0][0]), "data": {"programSessionId": 5}}), True)])
    @example([*PROBES[:3], (_probe({"programSessionId": 6})[0], True)])
    @example([*PROBES[3:], (_probe({"programSessionId": 7})[0], True)])
    def trial(bodies: list[tuple[str, bool | None]]) -> None:
        sent = [
            (aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=b)["MessageId"], valid)
            for b, valid in bodies
        ]
        result = tick()
        requests = result.run_requests or [] if isinstance(result, SensorResult) else []
        for request in requests:
            # As the daemon does: the run, with the request's tags, in PostgreSQL storage
            # (which refuses what SQLite would take, a NUL in a tag).
            instance.create_run_for_job(
                placeholder_job, tags={**request.tags, RUN_KEY_TAG: request.run_key or ""}
            )
        tick()  # acknowledges the messages whose runs now exist
        assert aws.queue_depth() == 0, "every message ended in a run or was dropped"
        with_runs = covering(instance)([f"sqs-{message_id}" for message_id, _ in sent])
        for message_id, valid in sent:
            if valid:
                assert f"sqs-{message_id}" in with_runs, f"valid message {message_id} has no run"

    trial()
