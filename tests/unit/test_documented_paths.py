"""Every path a document names exists in the repository: a reader who clones it finds each
file the README, CONTRIBUTING and docs/ point to (a path written from a folder, like
``adapters/service_view.py``, names the file whose path ends so)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
PATH = re.compile(
    r"(?<![\w/.:-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|yaml|yml|sql|toml|json|sh|ini|lock))(?![\w/])"
)
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)")
NOT_OURS = {"DAGSTER_HOME/dagster.yaml"}
"""Paths on an operator's machine, not in the repository."""


def _repository_files() -> list[str]:
    """Every file under the repository's root, but for hidden folders and built ones."""
    skip = {"__pycache__", "node_modules"}
    return [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*")
        if path.is_file()
        and not any(p.startswith(".") or p in skip for p in path.relative_to(ROOT).parts[:-1])
    ]


def test_every_path_a_document_names_exists() -> None:
    files = _repository_files()
    missing = []
    for document in DOCUMENTS:
        text = document.read_text()
        for named in sorted(set(PATH.findall(text)) - NOT_OURS):
            if not any(f == named or f.endswith("/" + named) for f in files):
                missing.append(f"{document.relative_to(ROOT)}: {named}")
        for target in sorted(set(LINK.findall(text))):
            if ("/" in target or "." in target) and not (document.parent / target).exists():
                missing.append(f"{document.relative_to(ROOT)}: link {target}")
    assert missing == []
