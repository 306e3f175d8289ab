from collections.abc import Iterator

import pytest

from jlg_pipeline.local.aws import FAKE_CREDENTIALS, start_moto
from jlg_pipeline.local.ports import free_port
from tests.support.web import Aws


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    """Real boto3 clients against a moto server of this test's own, over HTTP. Not moto's
    in-process mock: it patches botocore in this process and is not safe across threads (its
    FAQ), and the schedule sync calls EventBridge from several threads at once."""
    server = start_moto(free_port())
    for name, value in {**server.env, **FAKE_CREDENTIALS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        yield Aws(
            server.client("scheduler"), server.client("sqs"), server.queue_url, server.queue_arn
        )
    finally:
        server.stop()
