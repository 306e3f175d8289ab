"""The served API under schemathesis, counted: the real app under uvicorn (AWS calls to a
local moto server), its OpenAPI document fetched over HTTP, every documented operation fuzzed
with admin credentials and with generated (mostly junk) credentials.

    .venv/bin/python -m bench.trials.api_fuzz [--cases 1200]

Counted: cases sent, 5xx answers, answers carrying a stack trace, answers that break the
documented contract (status code, content type, response schema, the JSON envelope).
"""

import argparse
import math
from collections import Counter
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from bench.common import (
    JWT_ENV,
    Targets,
    admin_headers,
    bench_database,
    machine,
    strict_option,
    table,
)
from devstack.aws import start_moto
from devstack.ports import free_port
from devstack.system import app_env, aws_env
from jlg_pipeline.adapters.database import create_engine
from testkit.factories import NOT_SCHEDULED, create_sessions
from testkit.served import start_web

CONTRACT = (status_code_conformance, content_type_conformance, response_schema_conformance)


def fuzz(schema: Any, headers: dict[str, str], per_operation: int, tally: Counter[str]) -> None:
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=per_operation,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def run(case: Any) -> None:
            case.headers = {**(case.headers or {}), **headers}
            response = case.call(timeout=30)
            tally["cases"] += 1
            tally[f"status {response.status_code // 100}xx"] += 1
            if response.status_code >= 500:
                tally["5xx"] += 1
            if "Traceback" in response.text or 'File "' in response.text:
                tally["stack traces"] += 1
            try:
                case.validate_response(response, checks=(not_a_server_error, *CONTRACT))
            except Exception:  # noqa: BLE001 - counting contract breaks is the point
                tally["contract breaks"] += 1
            content_type = " ".join(response.headers.get("content-type", []))
            if content_type.startswith("application/json"):
                body = response.json()
                if not isinstance(body, dict) or set(body) != {"success", "data", "error"}:
                    tally["contract breaks"] += 1

        run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=1200)
    strict_option(parser)
    args = parser.parse_args()
    targets = Targets()
    tally: Counter[str] = Counter()
    aws = start_moto(free_port())
    try:
        with bench_database("jlg_bench_fuzz") as url:
            engine = create_engine(url)
            create_sessions(engine, 5, at_offset=None, status=NOT_SCHEDULED)
            engine.dispose()
            process, base = start_web(
                app_env(url, **aws_env(aws), **JWT_ENV, ENABLE_JOIN_LINK_SCHEDULER="true")
            )
            try:
                schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
                operations = sum(1 for _ in schema.get_all_operations())
                per_operation = math.ceil(args.cases / (2 * operations))
                admin = admin_headers()
                rounds = 0
                while tally["cases"] < args.cases:  # hypothesis stops early on small inputs
                    fuzz(schema, admin, per_operation, tally)
                    fuzz(schema, {}, per_operation, tally)
                    rounds += 1
            finally:
                process.terminate()
                process.wait(timeout=10)
    finally:
        aws.stop()
    statuses = ", ".join(
        f"{k[7:]}: {v}" for k, v in sorted(tally.items()) if k.startswith("status")
    )
    table(
        f"schemathesis against the served OpenAPI document ({machine()})",
        [
            (
                f"{operations} operations, admin and generated credentials, {rounds} round(s)",
                f"{tally['cases']:,} cases ({statuses})",
                f"{tally['5xx']} 5xx; {tally['stack traces']} stack traces; "
                f"{tally['contract breaks']} contract breaks",
                "MISS"
                if "MISS"
                in (
                    targets.at_most("5xx answers", tally["5xx"], 0),
                    targets.at_most("stack traces", tally["stack traces"], 0),
                    targets.at_most("contract breaks", tally["contract breaks"], 0),
                )
                else "PASS",
            )
        ],
        ("scenario", "tried", "outcome (target: none of each)", ""),
    )
    targets.finish(args.strict)


if __name__ == "__main__":
    main()
