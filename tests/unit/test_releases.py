"""Releases are named (CHANGELOG.md, the git tags, ``jlg --version``) and every migration is
in one release with its phase: expand steps safe while the previous release runs, contract
steps only after, one release after the expand step they complete."""

import importlib
import tomllib

from jlg_pipeline.migrate import EXPAND, PHASES, expand_head, phases
from testkit.releases import ROOT, releases


def test_the_releases_run_newest_first_and_the_newest_is_the_packages_version() -> None:
    named = releases()
    assert len(named) >= 2
    versions = [r.version for r in named]
    assert versions == sorted(versions, reverse=True)
    assert len(set(versions)) == len(versions)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert named[0].tag == f"v{version}"
    assert all(r.commit is not None for r in named[1:]), "only the newest may await its commit"


def test_every_migration_is_in_one_release_with_the_phase_it_declares() -> None:
    declared = dict(phases())
    assert set(declared.values()) <= set(PHASES), declared
    listed = [m for r in releases() for m in r.migrations]
    unreleased = set(declared) - {name for name, _ in listed}
    assert len(listed) == len({name for name, _ in listed}), "a migration in two releases"
    assert {name: phase for name, phase in listed} == {
        name: phase for name, phase in declared.items() if name not in unreleased
    }
    order = [name for name, _ in phases()]
    released = [name for r in reversed(releases()) for name, _ in r.migrations]
    assert released == order[: len(released)], "releases add migrations in the chain's order"


def test_within_a_release_expand_steps_come_before_contract_steps() -> None:
    """So ``jlg migrate expand`` applies all of a release's expand steps before the rollout."""
    for release in releases():
        kinds = [phase for _, phase in release.migrations]
        assert kinds == sorted(kinds, key=lambda k: k != EXPAND), release.tag


def test_a_contract_step_ships_a_release_after_the_expand_step_it_completes() -> None:
    released_in = {name: r.version for r in releases() for name, _ in r.migrations}
    for name, phase in phases():
        if phase == EXPAND:
            continue
        module = importlib.import_module(f"migrations.versions.{name}")
        completes = module.completes
        assert completes in released_in, f"{name} completes {completes}, which no release has"
        assert name not in released_in or released_in[completes] < released_in[name], name


def test_expand_stops_before_the_first_contract_step() -> None:
    order = phases()
    first_contract = next((i for i, (_, p) in enumerate(order) if p != EXPAND), len(order))
    assert expand_head(None) == order[first_contract - 1][0]
    assert expand_head(order[-1][0]) == order[-1][0], "nothing left: stays where it is"
