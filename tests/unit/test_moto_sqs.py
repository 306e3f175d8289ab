"""The benchmarks' moto (``testkit.moto_sqs``) delivers what moto delivers: only its cost
changes. Messages of random ages either side of the queue's retention period are received
through stock moto and through the stand-in; both hand out the same ones."""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.sqs.models import SQSBackend, sqs_backends

from testkit import moto_sqs

RETENTION_S = 60  # SQS's smallest


@contextmanager
def _receive_check(stand_in: bool) -> Iterator[None]:
    stock = SQSBackend.is_message_valid_based_on_retention_period
    if stand_in:
        moto_sqs.install()
    try:
        yield
    finally:
        SQSBackend.is_message_valid_based_on_retention_period = stock  # type: ignore[method-assign]


def _delivered(ages_s: list[int], stand_in: bool) -> list[str]:
    with mock_aws(), _receive_check(stand_in):
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(
            QueueName="q", Attributes={"MessageRetentionPeriod": str(RETENTION_S)}
        )["QueueUrl"]
        for i in range(len(ages_s)):
            sqs.send_message(QueueUrl=url, MessageBody=str(i))
        queue = sqs_backends["123456789012"]["us-east-1"].queues["q"]
        now_ms = int(time.time() * 1000)
        for message, age in zip(queue._messages, ages_s, strict=True):
            message.sent_timestamp = now_ms - age * 1000  # type: ignore[assignment]
        bodies: list[str] = []
        # moto ends a receive at the first expired message it meets (leaving it in flight),
        # so a receive can come back empty with fresh messages still waiting.
        for _ in range(len(ages_s) + 1):
            batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            bodies += [m["Body"] for m in batch.get("Messages", [])]
        return sorted(bodies, key=int)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([0, 1, RETENTION_S - 5, RETENTION_S + 5, 3600]), max_size=12))
def test_the_stand_in_delivers_what_moto_delivers(ages_s: list[int]) -> None:
    fresh = [str(i) for i, age in enumerate(ages_s) if age < RETENTION_S]
    assert _delivered(ages_s, stand_in=False) == fresh
    assert _delivered(ages_s, stand_in=True) == fresh


def test_the_stand_in_replaces_only_the_retention_check() -> None:
    with _receive_check(stand_in=True):
        assert SQSBackend.is_message_valid_based_on_retention_period is moto_sqs.within_retention
    assert SQSBackend.is_message_valid_based_on_retention_period is not moto_sqs.within_retention


@pytest.mark.parametrize("stand_in", [False, True])
def test_an_empty_queue_delivers_nothing(stand_in: bool) -> None:
    assert _delivered([], stand_in) == []
