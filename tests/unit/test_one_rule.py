"""Rules said once: a decision the code makes in more than one place is written in one
function the others call (what the code says, read from the files)."""

import ast
import io
import itertools
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _uses(name: str, *, but: str, called: bool = False) -> list[str]:
    """Where shipped code (not its comments or docstrings) names ``name`` (``called``: calls
    it), in any module but ``but``."""
    found = []
    for path in sorted([*(ROOT / "jlg_pipeline").rglob("*.py"), *(ROOT / "web").rglob("*.py")]):
        if path == ROOT / but:
            continue
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
        found += [
            f"{path.relative_to(ROOT)}:{token.start[0]}"
            for token, after in itertools.pairwise(tokens)
            if token.type == tokenize.NAME
            and token.string == name
            and (not called or after.string == "(")
        ]
    return found


def test_a_near_time_goes_direct_by_one_rule() -> None:
    """Whether a time is near enough to go around EventBridge is decided by
    ``domain/schedule_sync.goes_direct``, for a change in hand and in SQL alike."""
    assert _uses("DIRECT_WITHIN", but="jlg_pipeline/domain/schedule_sync.py") == []


def test_the_tier_of_sessions_no_attempt_holds_is_one_predicate() -> None:
    """ "SCHEDULED, or IN_PROGRESS gone stale" (what the sweep, the watchdog and the backlog
    gauge go after, through ix_psession_link_gen_fresh) is ``session_statements.unattended``;
    the candidate queries name no status of that tier themselves."""
    statements = "jlg_pipeline/adapters/session_statements.py"
    in_candidates = [
        use
        for use in _uses("IN_PROGRESS", but=statements) + _uses("SCHEDULED", but=statements)
        if use.startswith("jlg_pipeline/adapters/candidates.py")
    ]
    assert in_candidates == []


def test_waiting_happens_in_one_place_outside_the_adapters() -> None:
    """Services and orchestration wait through one bounded retry helper
    (``services/retrying.py``, on the one backoff); every other wait is a not-before time the
    watchdog honours or the shared view's."""
    sleeping = [
        use
        for use in _uses("sleep", but="jlg_pipeline/services/retrying.py", called=True)
        if use.startswith(("jlg_pipeline/services/", "jlg_pipeline/orchestration/"))
    ]
    assert sleeping == []


def test_one_module_bounds_every_blocking_client_call() -> None:
    """The database's and the online-session service's calls are cut at their deadline by
    one keeper (``adapters/socket_deadlines.py``): no other module shuts a socket down or
    runs a timer of its own for it."""
    keeper = "jlg_pipeline/adapters/socket_deadlines.py"
    assert _uses("SHUT_RDWR", but=keeper) == []
    assert _uses("Timer", but=keeper) == []


FIRST_PARTY = ("jlg_pipeline", "web", "migrations", "tests", "testkit", "bench", "devstack")


def test_nothing_imports_a_dependency_s_private_parts() -> None:
    """A dependency's private module or name (a leading underscore, or pgserver's ``pg_ctl``,
    which only its private ``_commands`` defines) may change in any release: the repository
    reaches every dependency through its public names."""
    private = []
    for path in sorted(ROOT.glob("[!.]*/**/*.py")):
        if path.is_relative_to(ROOT / "migrations" / "versions"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] in FIRST_PARTY:
                    continue
                names = [alias.name for alias in node.names]
                parts = node.module.split(".") + names
            elif isinstance(node, ast.Import):
                parts = [p for alias in node.names for p in alias.name.split(".")]
                if parts[0] in FIRST_PARTY:
                    continue
            else:
                continue
            if any((p.startswith("_") and not p.startswith("__")) or p == "pg_ctl" for p in parts):
                private.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert private == []


def test_a_session_id_is_parsed_where_it_enters_and_trusted_inside() -> None:
    """``validation.session_id`` (the one rule) turns a value into a ``SessionId`` where it
    enters: the HTTP path, the request a message, run config or a stored row becomes
    (``BulkRegisterRequest.parse``), a sensor cursor the watchdog reads (it can be typed into
    the UI), ``jlg why``'s argument. The stores take that type and check nothing again."""
    edges = (
        "web/parsing.py",
        "jlg_pipeline/cli.py",
        "jlg_pipeline/domain/generation.py",
        "jlg_pipeline/orchestration/watchdog.py",
    )
    inside = [
        use
        for use in _uses("session_id", but="jlg_pipeline/domain/validation.py", called=True)
        if not use.startswith(edges)
    ]
    assert inside == []
