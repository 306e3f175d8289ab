"""The commands the README and the runbook print, run as printed against a running stack:
every fenced line that starts with ``.venv/bin/`` and the README's curl line, in a shell that
has sourced the stack's ``dev.env`` as ``jlg dev`` writes it. Only the path of that file and the
stack's URL are substituted, so a command that drifts from what works fails here."""

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from devstack.seed import seed_demo
from devstack.stack import DEV_ENV_FILE, write_dev_env
from testkit.factories import session_row
from tests.e2e.conftest import Stack
from tests.support import ROOT

pytestmark = pytest.mark.timeout(300)

DOCS = ("README.md", "docs/operations.md")
ELSEWHERE = ("$HOST_DATABASE_URL", "$DAGSTER_DATABASE_URL", "--adopt")
"""Commands for a host application's database (adopting it, its roles), which the local stack
is not: tests/integration/test_guest_database.py and test_database_roles.py run them there."""
FENCE = re.compile(r"^\s*```[a-z]*\n(.*?)^\s*```", re.MULTILINE | re.DOTALL)


def documented_commands() -> list[str]:
    """Each fenced command of the docs, continuation lines joined, comments dropped."""
    commands = []
    for doc in DOCS:
        for block in FENCE.findall((ROOT / doc).read_text()):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if line.startswith(
                    (".venv/bin/dagster", ".venv/bin/jlg", "curl ", "psql ")
                ) and not any(marker in line for marker in ELSEWHERE):
                    commands.append(line)
    return commands


def _shell(command: str, dev_env: Path, stack: Stack) -> subprocess.CompletedProcess[str]:
    command = command.replace("http://127.0.0.1:8000", stack.web_url)
    return subprocess.run(
        ["bash", "-c", f"source {dev_env} && {command}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": str(dev_env.parent)},
    )


def test_every_documented_command_works_as_printed(
    engine: Engine, start_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    commands = documented_commands()
    kinds = {c.split()[0] + " " + c.split()[1] + " " + c.split()[2] for c in commands}
    assert {
        ".venv/bin/dagster job backfill",
        ".venv/bin/dagster job launch",
        ".venv/bin/jlg schedules resync",
    } <= kinds, commands
    assert any(c.startswith("curl ") for c in commands)
    assert any(c.startswith("psql ") for c in commands)
    # What `make dev` seeds: the demo programme's three sessions, the first of them session 1.
    assert seed_demo(engine)[0] == 1, "the README's curl line arms session 1"
    stack = start_stack()
    dev_env = tmp_path / DEV_ENV_FILE.name
    write_dev_env(dev_env, stack.env)

    for command in commands:
        done = _shell(command, dev_env, stack)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if command.startswith("curl "):
            assert '"success":true' in done.stdout.replace(" ", ""), (command, done.stdout)
        if "schedules resync" in command:
            assert "marked pending" in done.stdout
        if command.startswith("psql "):
            assert "link_generation_status" in done.stdout

    assert session_row(engine, 1)["link_generation_status"] == "SCHEDULED"
    wanted = {"join_link_backfill_job": 2, "join_link_fallback_sweep_job": 1}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        runs = stack.runs()
        finished = {job: [r for r in runs if r.job_name == job and r.is_finished] for job in wanted}
        if all(len(finished[job]) >= n for job, n in wanted.items()):
            break
        time.sleep(2)
    else:
        pytest.fail(f"runs did not finish: {[(r.job_name, r.status) for r in runs]}")
    expected = {"join_link_backfill_job": "backfill", "join_link_fallback_sweep_job": "manual"}
    for job in wanted:
        for run in finished[job]:
            assert run.is_success, (job, run.status)
            assert run.tags["jlg/trigger"] == expected[job], "Dagster's records, not the tags"
