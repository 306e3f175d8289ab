"""Thin boto3 adapter over EventBridge Scheduler (TRD AwsSchedulerService).

Only CreateSchedule, UpdateSchedule and DeleteSchedule are called, so the TRD's
least-privilege IAM policy stays enough. Timeouts and retries are bounded so a slow AWS
cannot hold an applier for long. Every failure is a SchedulerCallFailed naming only the
operation, error code and status: AWS's messages can quote ARNs and request ids.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from jlg_pipeline.adapters.aws_clients import aws_client
from jlg_pipeline.domain.errors import SchedulerCallFailed


def scheduler_client(*, region_name: str | None = None, endpoint_url: str | None = None) -> Any:
    """A boto3 ``scheduler`` client; region and endpoint default to the AWS_* variables."""
    return aws_client("scheduler", region_name=region_name, endpoint_url=endpoint_url)


_ERROR_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,63}")
"""AWS's error codes (ThrottlingException, ConflictException, …); anything else in an
answer's place is not kept."""


def _code(exc: ClientError) -> str:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return code if _ERROR_CODE.fullmatch(code) else "error"


@contextmanager
def _described() -> Iterator[None]:
    # Raised without the cause: boto's errors quote the answer, and a failure's chain is
    # shown whole in the Dagster UI.
    try:
        yield
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        raise SchedulerCallFailed(f"{exc.operation_name}: {_code(exc)} (HTTP {status})") from None
    except BotoCoreError as exc:
        raise SchedulerCallFailed(type(exc).__name__) from None


class AwsScheduler:
    def __init__(self, client: Any) -> None:
        self._client = client

    def upsert(self, request: dict[str, Any]) -> Literal["updated", "created"]:
        """Update the named schedule, or create it when it does not exist yet."""
        with _described():
            try:
                self._client.update_schedule(**request)
                return "updated"
            except ClientError as exc:
                if _code(exc) != "ResourceNotFoundException":
                    raise
            try:
                self._client.create_schedule(**request)
                return "created"
            except ClientError as exc:
                if _code(exc) != "ConflictException":
                    raise
            # Created by a concurrent request between our update and create.
            self._client.update_schedule(**request)
            return "updated"

    def delete(self, name: str, group_name: str) -> bool:
        """Delete the named schedule; False when there was none (already fired, or never made)."""
        with _described():
            try:
                self._client.delete_schedule(Name=name, GroupName=group_name)
            except ClientError as exc:
                if _code(exc) == "ResourceNotFoundException":
                    return False
                raise
            return True
