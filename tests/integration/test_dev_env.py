"""The local stack's environment file, as a shell reads it: private, and every value exactly
as written (quotes, dollars, spaces)."""

import os
import stat
import subprocess
from pathlib import Path

from devstack import stack


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_dev_env_is_private_and_sourceable(tmp_path: Path) -> None:
    path = tmp_path / "dev.env"
    env = {
        "DAGSTER_HOME": str(tmp_path / "dagster home"),
        "JLG_JWT_SECRET": "it's-$ecret",
        "JLG_DATABASE_URL": "postgresql://postgres@127.0.0.1/jlg",
        "UNRELATED": "x",
    }
    stack.write_dev_env(path, env)
    assert _mode(path) == 0o600
    shown = subprocess.run(
        ["bash", "-c", f'source {path} && echo "$DAGSTER_HOME|$JLG_JWT_SECRET|${{UNRELATED:-}}"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == f"{tmp_path / 'dagster home'}|it's-$ecret|"
