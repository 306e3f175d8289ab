"""The image's install, without Docker: the files the Dockerfile's build stage copies are
built into the package's wheel, as ``pip install .`` does there, and that install alone (no
checkout, no alembic.ini) migrates an empty database to head with ``jlg migrate``. It ships
no development stack or stand-in, and ``jlg dev`` there says it needs a checkout."""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import text

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.migrate import alembic_config
from testkit.postgres import scratch_database
from tests.support import ROOT


def _build_stage_sources() -> list[str]:
    """What the Dockerfile's first stage COPYs from the build context."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    build_stage = dockerfile.split("\nFROM ", 2)[1]
    sources = []
    for line in build_stage.splitlines():
        if re.match(r"COPY\s", line) and "--from" not in line:
            sources += line.split()[1:-1]
    return sources


def test_the_images_install_migrates_an_empty_database(pg_admin_url: str, tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    sources = _build_stage_sources()
    assert {"requirements.lock", "jlg_pipeline", "web", "migrations"} <= set(sources)
    for source in sources:
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(origin, context / source)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "wheel"),
            str(context),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    [wheel] = (tmp_path / "wheel").glob("jlg_pipeline-*.whl")
    shipped = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {"jlg_pipeline", "web", "migrations"} <= shipped
    stand_ins = shipped & {"devstack", "testkit", "tests", "bench"}
    assert not stand_ins, f"the image ships only what production runs: {stand_ins}"
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    with scratch_database(pg_admin_url, "jlg_image", migrated=False) as url:
        migrated = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, migrations; from jlg_pipeline.cli import main;"
                f" assert migrations.__file__.startswith({str(site)!r}), migrations.__file__;"
                " sys.exit(main(['migrate']))",
            ],
            cwd=tmp_path,
            env={"PYTHONPATH": str(site), "JLG_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert migrated.returncode == 0, migrated.stderr
        dev = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from jlg_pipeline.cli import main; sys.exit(main(['dev']))",
            ],
            cwd=tmp_path,
            env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert dev.returncode == 2
        assert "run from a checkout" in dev.stderr, "a clear refusal, not a traceback"
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        finally:
            engine.dispose()
        assert version == ScriptDirectory.from_config(alembic_config(url)).get_current_head()
