"""One moto server serves a worker's tests (tests/integration/conftest.py): emptied for each,
it keeps nothing an earlier holder left."""

import json

from devstack.aws import emptied_moto
from tests.support.web import Aws


def test_an_emptied_server_keeps_no_message_schedule_or_queue_of_the_last_holder(
    aws: Aws, moto_port: int
) -> None:
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=json.dumps({"left": "behind"}))
    aws.sqs.create_queue(QueueName="left-behind")
    aws.scheduler.create_schedule(
        Name="left-behind",
        ScheduleExpression="at(2099-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": aws.queue_arn, "RoleArn": "arn:aws:iam::123456789012:role/x"},
    )
    assert aws.queue_depth() == 1

    emptied = emptied_moto(moto_port)
    sqs, scheduler = emptied.client("sqs"), emptied.client("scheduler")

    assert emptied.queue_url == aws.queue_url
    assert sqs.list_queues()["QueueUrls"] == [emptied.queue_url]
    assert (
        sqs.receive_message(QueueUrl=emptied.queue_url, WaitTimeSeconds=0).get("Messages") is None
    )
    assert scheduler.list_schedules()["Schedules"] == []
