from collections.abc import Iterator

import pytest

from jlg_pipeline.local.aws import FAKE_CREDENTIALS, emptied_moto, start_moto
from jlg_pipeline.local.ports import free_port
from tests.support.web import Aws


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    """One moto server per worker, for every test's ``aws``: stopping one waits out its
    server's 0.5 s poll, which a server per test paid ~200 times a run."""
    port = free_port()
    server = start_moto(port)
    try:
        yield port
    finally:
        server.stop()


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
