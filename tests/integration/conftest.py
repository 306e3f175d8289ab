import pytest

from devstack.aws import FAKE_CREDENTIALS, emptied_moto
from tests.support.web import Aws


@pytest.fixture
def aws(moto_port: int, monkeypatch: pytest.MonkeyPatch) -> Aws:
    """Real boto3 clients against a moto server emptied for this test, over HTTP. Not moto's
    in-process mock: it patches botocore in this process and is not safe across threads (its
    FAQ), and the schedule sync calls EventBridge from several threads at once."""
    server = emptied_moto(moto_port)
    for name, value in {**server.env, **FAKE_CREDENTIALS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return Aws(server.client("scheduler"), server.client("sqs"), server.queue_url, server.queue_arn)
