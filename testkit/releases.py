"""The named releases, as CHANGELOG.md gives them (a version, its date, the commit it was cut
from, the migrations it adds and the phase of each), and a release's code checked out from
git, for the tests and the upgrade trial that run a previous release against a newer schema."""

import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"

HEADING = re.compile(r"^## v(\d+)\.(\d+)\.(\d+) — (\d{4}-\d{2}-\d{2})(?: — ([0-9a-f]{7,40}))?$")
MIGRATIONS = re.compile(r"^Migrations: (.*)\.$")
LISTED = re.compile(r"`(\w+)` \((expand|contract)\)")


@dataclass(frozen=True)
class Release:
    version: tuple[int, int, int]
    date: str
    commit: str | None
    """The commit it was cut from; None only for the newest, until the next change names it."""
    migrations: tuple[tuple[str, str], ...]
    """(revision, phase), in the order the release lists them."""

    @property
    def tag(self) -> str:
        return "v{}.{}.{}".format(*self.version)


def releases(text: str | None = None) -> list[Release]:
    """Every release CHANGELOG.md names, newest first."""
    found: list[Release] = []
    lines = (text if text is not None else CHANGELOG.read_text()).splitlines()
    for number, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading is None:
            continue
        listed = next(
            (m for m in map(MIGRATIONS.match, lines[number + 1 :]) if m is not None), None
        )
        if listed is None:
            raise ValueError(f"{line}: no 'Migrations: …' line")
        migrations = tuple(LISTED.findall(listed.group(1)))
        major, minor, patch, date, commit = heading.groups()
        found.append(Release((int(major), int(minor), int(patch)), date, commit, migrations))
    return found


def git(*args: str) -> str:
    return subprocess.run(  # noqa: S603 - git with our own arguments
        ["git", "-C", str(ROOT), *args],  # noqa: S607 - git from PATH, as a developer runs it
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def resolve(ref: str) -> str:
    """The commit ``ref`` names: a release's tag (or, where the tag was not fetched, the commit
    CHANGELOG.md gives for that version), or any revision git knows."""
    for release in releases():
        if ref == release.tag and release.commit is not None:
            try:
                return git("rev-parse", "--verify", f"{ref}^{{commit}}")
            except subprocess.CalledProcessError:
                return git("rev-parse", "--verify", f"{release.commit}^{{commit}}")
    return git("rev-parse", "--verify", f"{ref}^{{commit}}")


def previous_schema_release() -> Release:
    """The newest release whose migrations stop before this checkout's: the code that may still
    run while this checkout's expand steps are applied."""
    ours = {path.stem for path in (ROOT / "migrations" / "versions").glob("0*.py")}
    for release in releases():
        theirs = {
            name for r in releases() if r.version <= release.version for name, _ in r.migrations
        }
        if release.commit is not None and theirs < ours:
            return release
    raise LookupError("no release before this checkout's migrations")


def export(commit: str, into: Path) -> Path:
    """The tree of ``commit`` written under ``into`` (no .git: a release's code, to run)."""
    archive = into.with_suffix(".tar")
    with archive.open("wb") as out:
        subprocess.run(  # noqa: S603
            ["git", "-C", str(ROOT), "archive", "--format=tar", commit],  # noqa: S607
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into
