"""No credential is committed: every tracked file is scanned for tokens and keys."""

import subprocess
from pathlib import Path

from tests.support import ROOT
from tests.support.secrets import find_secrets


def test_the_scan_finds_what_it_looks_for() -> None:
    assert find_secrets("Authorization: Bearer eyJhbGciOiJI.eyJzdWIiOiI3.c2lnbmF0dXJlLXh4") == [
        "JWT",
        "bearer token",
    ]
    assert find_secrets("AKIAABCDEFGHIJKLMNOP") == ["AWS access key"]


def test_no_tracked_file_holds_a_secret() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = {}
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        if path.is_file() and path.resolve() != Path(__file__).resolve():
            hits = find_secrets(path.read_text(errors="replace"))
            if hits:
                found[str(name.decode())] = hits
    assert found == {}
