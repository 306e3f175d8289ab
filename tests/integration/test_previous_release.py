"""The previous release keeps working against this release's schema while a rollout is half
done (docs/operations.md, "Upgrading"): its code, checked out from its tag, migrates a database
to its own head; this release's expand steps (``jlg migrate expand``) are applied under it;
then the previous release's admin API arms sessions and its generation job generates one, and
this release's gate generates the other the old API armed. The light version of the upgrade
trial (``bench.trials.upgrade``), which does the same under load with every process."""

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import Engine, func, select, text

from devstack.ports import free_port, wait_until_answers
from devstack.system import BIN, Children, app_env, from_tree, start_web
from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.tables import local_bulk_job
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.generation import BulkRegisterRequest, GenerationResult
from jlg_pipeline.migrate import EXPAND, current_revision, expand_head, migrate, phases
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import add_registrations, create_session, session_row
from testkit.postgres import scratch_database
from testkit.releases import ROOT, Release, export, git, previous_schema_release, releases, resolve
from tests.support.fakes import RecordingRegistrar
from tests.support.web import JWT_ENV, admin_headers

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git history"),
]


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> tuple[Release, Path]:
    release = previous_schema_release()
    tree = export(resolve(release.tag), tmp_path_factory.mktemp("previous") / "tree")
    return release, tree


@pytest.fixture
def old_database(pg_admin_url: str, previous: tuple[Release, Path]) -> Iterator[str]:
    """A database the previous release migrated, with its own code, to its own head."""
    _, tree = previous
    imported = subprocess.run(
        [str(BIN / "python"), "-c", "import jlg_pipeline, web; print(jlg_pipeline.__file__)"],
        cwd=tree,
        env=from_tree(app_env("postgresql://unused"), tree),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(imported.stdout.strip()).is_relative_to(tree), "the release's code, not ours"
    with scratch_database(pg_admin_url, "jlg_previous", migrated=False) as url:
        done = subprocess.run(
            [str(BIN / "python"), "-m", "jlg_pipeline.cli", "--database-url", url, "migrate"],
            cwd=tree,
            env=from_tree(app_env(url), tree),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        yield url


def test_each_release_names_a_commit_of_this_history_and_its_tag_points_there() -> None:
    for release in releases():
        if release.commit is None:
            continue
        full = git("rev-parse", "--verify", f"{release.commit}^{{commit}}")
        try:
            tagged = git("rev-parse", "--verify", f"{release.tag}^{{commit}}")
        except subprocess.CalledProcessError:
            continue  # a clone without tags: the CHANGELOG's commit stands in
        assert tagged == full, f"{release.tag} points at {tagged}, the CHANGELOG says {full}"


def test_the_previous_releases_api_and_generation_work_on_this_releases_schema(
    old_database: str, previous: tuple[Release, Path], tmp_path: Path
) -> None:
    release, tree = previous
    engine = create_engine(old_database)
    try:
        _run_against_the_new_schema(engine, old_database, release, tree, tmp_path)
    finally:
        engine.dispose()


def _run_against_the_new_schema(
    engine: Engine, url: str, release: Release, tree: Path, tmp_path: Path
) -> None:
    theirs = release.migrations[-1][0]
    assert current_revision(url) == theirs, "the previous release migrated it to its own head"
    by_old_job, by_new_gate = create_session(engine), create_session(engine)
    add_registrations(engine, by_old_job, 3)
    add_registrations(engine, by_new_gate, 2)

    migrate(url, EXPAND)
    ours = [name for name, _ in phases()]
    expanded = ours.index(expand_head(theirs))
    assert current_revision(url) == ours[expanded], "this release's expand steps, if any"

    settings = {
        **JWT_ENV,
        "JLG_REGISTRAR": "local",
        "ENABLE_JOIN_LINK_SCHEDULER": "false",
        "ENABLE_JOIN_LINK_FALLBACK_CRON": "false",
        "TMPDIR": str(tmp_path),
    }
    env = app_env(url, **settings)
    children = Children()
    try:
        web_url = start_web(children, env, free_port(), tmp_path / "web.log", root=tree)
        wait_until_answers(f"{web_url}/readyz", 60, children.running)
        _arm(web_url, by_old_job)
        _generate_with_the_previous_job(tree, env, by_old_job, tmp_path)
        assert session_row(engine, by_old_job)["link_generation_status"] == "COMPLETED"
        # Armed after the previous release's run ended: from v0.2.0 on, a run takes what the
        # queue gives once its own session is done.
        _arm(web_url, by_new_gate)
    finally:
        children.stop()
    log = (tmp_path / "web.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]

    time.sleep(2.5)  # its time has come
    outcome = generate_for_session(
        BulkRegisterRequest.parse(by_new_gate),
        repository=ProgramSessionRepository(engine),
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
    )
    assert outcome.result is GenerationResult.COMPLETED, outcome
    with engine.connect() as conn:
        jobs = conn.execute(
            select(func.count()).where(local_bulk_job.c.program_session_id == by_old_job)
        ).scalar_one()
        attempts = conn.execute(
            text(
                "SELECT program_session_id, trigger, outcome FROM jlg_generation_attempt"
                " ORDER BY program_session_id"
            )
        ).all()
    assert jobs == 1, "the previous release's job called bulkRegister once"
    assert [tuple(a) for a in attempts] == [
        (by_old_job, "manual", "COMPLETED"),
        (by_new_gate, "event", "COMPLETED"),
    ]


def _arm(web_url: str, session_id: int) -> None:
    """The previous release's PATCH, for a time two seconds ahead."""
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat().replace("+00:00", "Z")
    armed = httpx.patch(
        f"{web_url}/program-session/{session_id}/link-generation",
        json={"linkGenerationAt": soon},
        headers=admin_headers(),
        timeout=30,
    )
    assert armed.status_code == 200, armed.text
    assert armed.json()["data"]["linkGenerationStatus"] == "SCHEDULED"


def _generate_with_the_previous_job(
    tree: Path, env: dict[str, str], session_id: int, tmp_path: Path
) -> None:
    """The previous release's one-session job, launched by hand as an operator would."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {"ops": {"generate_join_links": {"config": {"programSessionId": session_id}}}}
        )
    )
    argv = [str(BIN / "dagster"), "job", "execute", "-m", "jlg_pipeline.definitions"]
    done = subprocess.run(
        [*argv, "-j", "join_link_generation_job", "-c", str(config)],
        cwd=tree,
        env=from_tree({**env, "DAGSTER_HOME": str(home)}, tree),
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
