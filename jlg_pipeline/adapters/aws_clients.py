"""boto3 clients with bounded timeouts and retries, so a slow AWS cannot hold a caller for long.

boto3 is imported when a client is made, not at import: a Dagster run that never talks to
AWS (every generation run) does not pay for loading it.
"""

from typing import Any


def aws_client(
    service: str, *, region_name: str | None = None, endpoint_url: str | None = None
) -> Any:
    """A boto3 client; region and endpoint default to the standard AWS_* variables."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=2,
        read_timeout=5,
        retries={"max_attempts": 2, "mode": "standard"},
        # Starlette runs sync work on up to 40 threads; botocore's default pool is 10.
        max_pool_connections=40,
    )
    return boto3.client(service, region_name=region_name, endpoint_url=endpoint_url, config=config)  # type: ignore[call-overload]
