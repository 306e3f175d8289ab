"""`.env.example` and the runbook's configuration table name the same variables, so a new
setting cannot ship undocumented in one of them."""

import re

from tests.support import ROOT

OURS = re.compile(r"\b((?:JLG|ENABLE|AWS_SCHEDULER|DAGSTER)_[A-Z0-9_]+)\b")


def test_env_example_and_the_runbook_table_agree() -> None:
    example = {
        line.split("=", 1)[0].strip()
        for line in (ROOT / ".env.example").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    }
    example = {name for name in example if OURS.fullmatch(name)}
    runbook = (ROOT / "docs" / "operations.md").read_text()
    table = runbook.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(OURS.findall(table))
    assert {"JLG_DATABASE_URL", "ENABLE_JOIN_LINK_SCHEDULER", "JLG_DAGSTER_RETENTION_DAYS"} <= (
        example & documented
    )
    assert example - documented == set(), "in .env.example, missing from the runbook's table"
    assert documented - example - {"DAGSTER_HOME"} == set(), "in the table, not in .env.example"
