"""Building the front door for tests: settings, tokens and a moto-backed AWS."""

from dataclasses import dataclass
from typing import Any

import jwt
from starlette.testclient import TestClient

from devstack.tokens import mint_token
from jlg_pipeline.adapters.aws_scheduler import AwsScheduler
from jlg_pipeline.config import Settings
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from web.app import create_app

SECRET = "jlg-test-secret-that-is-long-enough-for-hs256"
ISSUER = "https://idp.test.invalid"
AUDIENCE = "jlg-admin-api"
JWT_ENV = {"JLG_JWT_SECRET": SECRET, "JLG_JWT_ISSUER": ISSUER, "JLG_JWT_AUDIENCE": AUDIENCE}
"""The web app's token settings in tests, as production has them (issuer and audience)."""
ROLE_ARN = "arn:aws:iam::123456789012:role/jlg-scheduler-execution"


@dataclass
class Aws:
    scheduler: Any
    sqs: Any
    queue_url: str
    queue_arn: str

    def queue_depth(self) -> int:
        """Messages on the queue, visible or in flight."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
            ],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def settings_for(db_url: str, queue_arn: str | None, **overrides: Any) -> Settings:
    base = Settings(
        database_url=db_url,
        jwt_secret=SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        scheduler_enabled=True,
        scheduler_target=ScheduleTarget(queue_arn, ROLE_ARN) if queue_arn else None,
        aws_region="us-east-1",
    )
    return base.model_copy(update=overrides)


class SettledClient(TestClient):
    """A TestClient that, after each request, waits for the fast path it started (the app runs
    it on its own threads after the response), so a test reads the outcome, not a race."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        response = super().request(*args, **kwargs)
        fast_path = getattr(getattr(self.app, "state", None), "fast_path", None)
        if fast_path is not None:
            assert fast_path.drain(20), "the fast path did not end within 20 s"
        return response


def client_for(settings: Settings, scheduler_client: Any = None) -> TestClient:
    """The served app; ``scheduler_client`` (a boto3 scheduler client, moto's or a recording
    or failing one) backs the real EventBridge adapter in place of the one settings build."""
    scheduler = AwsScheduler(scheduler_client) if scheduler_client is not None else None
    return SettledClient(create_app(settings, scheduler=scheduler), raise_server_exceptions=False)


def token(user_id: int = 7, roles: tuple[str, ...] = ("admin", "mentor")) -> str:
    """A token the test servers take: signed with SECRET, for ISSUER and AUDIENCE."""
    return mint_token(SECRET, user_id=user_id, roles=roles, issuer=ISSUER, audience=AUDIENCE)


def admin_headers(user_id: int = 7, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(user_id)}", "X-Active-Role": "admin", **extra}


def raw_token(claims: dict[str, Any], key: Any = SECRET, algorithm: str = "HS256") -> str:
    """``claims`` signed as given, with ISSUER and AUDIENCE unless they name their own; a
    claim given as None is left out."""
    merged = {"iss": ISSUER, "aud": AUDIENCE, **claims}
    return jwt.encode({k: v for k, v in merged.items() if v is not None}, key, algorithm=algorithm)


class RecordingClient:
    """Wraps a boto3 client and records the operations called on it."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if callable(attribute) and not name.startswith("_"):

            def recorded(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attribute(*args, **kwargs)

            return recorded
        return attribute
