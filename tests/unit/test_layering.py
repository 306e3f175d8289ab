"""Imports point one way: the domain core (domain, services) imports neither Dagster,
Starlette nor the AWS SDK, no adapter imports an entry point's framework, the two entry
points (``web/``, ``orchestration/``) never import each other, and nothing shipped imports
the development stack or the test stand-ins (``devstack``, ``testkit``, ``tests``). Shipped
code reads the environment only in the settings module."""

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "jlg_pipeline"
FRAMEWORKS = {"dagster", "starlette", "uvicorn"}
AWS = {"boto3", "botocore"}
RULES = {
    "domain": FRAMEWORKS
    | AWS
    | {"sqlalchemy", "psycopg", "httpx", "jlg_pipeline.adapters", "jlg_pipeline.services"},
    "services": FRAMEWORKS | AWS | {"sqlalchemy", "psycopg", "httpx"},
    "adapters": FRAMEWORKS | {"jlg_pipeline.services"},
    "orchestration": {"starlette", "uvicorn", "web"},
}
READS_ENVIRONMENT = {"jlg_pipeline/config.py"}
SHIPPED = {
    "web": {"dagster", "jlg_pipeline.orchestration", "jlg_pipeline.definitions"},
    "jlg_pipeline": {"testkit", "tests", "bench", "devstack"},
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(RULES))
def test_layer_imports(layer: str) -> None:
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            banned = [b for b in RULES[layer] if name == b or name.startswith(b + ".")]
            assert not banned, f"{path.relative_to(PACKAGE.parent)} imports {name}"


@pytest.mark.parametrize("top", sorted(SHIPPED))
def test_shipped_code_imports(top: str) -> None:
    files = sorted((ROOT / top).rglob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            banned = [b for b in SHIPPED[top] if name == b or name.startswith(b + ".")]
            assert not banned, f"{path.relative_to(ROOT)} imports {name}"


ENVIRONMENT = {"environ", "environb", "getenv"}


def _reads_environment(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ENVIRONMENT for a in node.names)
        ):
            return True
    return False


def test_only_the_entry_points_read_the_environment() -> None:
    files = [p for top in ("jlg_pipeline", "web", "migrations") for p in (ROOT / top).rglob("*.py")]
    assert files
    readers = {
        str(p.relative_to(ROOT))
        for p in files
        if _reads_environment(p)
        and not any(str(p.relative_to(ROOT)).startswith(allowed) for allowed in READS_ENVIRONMENT)
    }
    assert readers == set(), f"read the environment through Settings: {sorted(readers)}"


OURS = {"jlg_pipeline", "web", "migrations", "tests", "testkit", "bench", "devstack"}


def test_nothing_private_of_a_dependency_is_imported() -> None:
    """A dependency's private modules (``dagster._…``, ``pgserver._…``) change in any release;
    only what it publishes is used, in the shipped code, the tests and the benchmarks alike."""
    private = [
        f"{path.relative_to(ROOT)}: {name}"
        for top in sorted(OURS)
        for path in sorted((ROOT / top).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] not in OURS
        and any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert private == []


MAX_MODULE_LINES = 400


def test_no_shipped_module_is_over_400_lines() -> None:
    """A module past this holds more than one thing (docs/architecture.md, "One queue");
    split it by what each part does rather than raise the bound."""
    long = {
        str(path.relative_to(ROOT)): lines
        for top in ("jlg_pipeline", "web")
        for path in (ROOT / top).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


BELOW_THE_EDGES = ("jlg_pipeline/adapters", "jlg_pipeline/services", "jlg_pipeline/bootstrap.py")
"""Where a value arrives already parsed: the edges (``web/``, a queue message in
``domain/messages.py``, run config in ``orchestration/``, the CLI) turned it into its type."""
VALIDATION = ROOT / "jlg_pipeline" / "domain" / "validation.py"


def _checks() -> set[str]:
    """validation's functions that check a value (``SessionId`` is the parsed type itself)."""
    tree = ast.parse(VALIDATION.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} - {"shown"}


def _check_calls(path: Path, checks: set[str]) -> list[str]:
    tree = ast.parse(path.read_text())
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "jlg_pipeline.domain.validation"
        for alias in node.names
        if alias.name in checks
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "validation" and f.attr in checks:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} validation.{f.attr}")
        elif isinstance(f, ast.Name) and f.id in imported:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {f.id}")
    return found


def test_nothing_below_the_edges_checks_a_value_again() -> None:
    """Parse once: an id, a time, a limit or a request's options is checked where it enters;
    the stores and the services take the parsed value and check nothing again."""
    checks = _checks()
    assert {"session_id", "actor_user_id", "positive_limit", "aware_datetime"} <= checks
    files = [
        p
        for where in BELOW_THE_EDGES
        for p in ((ROOT / where).rglob("*.py") if (ROOT / where).is_dir() else [ROOT / where])
    ]
    assert files
    found = [call for path in sorted(files) for call in _check_calls(path, checks)]
    assert found == []


def test_a_request_is_checked_when_parsed_not_each_time_it_is_made() -> None:
    """``BulkRegisterRequest.parse`` checks; the type itself is a plain record, so a request
    passed from the queue to the gate to the registrar is not checked three times."""
    from jlg_pipeline.domain.generation import BulkRegisterRequest

    assert not hasattr(BulkRegisterRequest, "__post_init__")
    assert callable(BulkRegisterRequest.parse)


BUILDER = "devstack/system.py"
SYSTEM_PROCESSES = {"dagster-daemon", "dagster-webserver"}


def _starts_a_process_of_the_system(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "start"
            and isinstance(node.func.value, ast.Name | ast.Attribute)
            and "children" in ast.unparse(node.func.value).lower()
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node.func)}")
        # A command line: an executable's path (``BIN / "dagster-daemon"``) or an argv list.
        parts = (
            [node.right]
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            else node.elts
            if isinstance(node, ast.List)
            else []
        )
        found += [
            f"{path.relative_to(ROOT)}:{part.lineno} {part.value!r}"
            for part in parts
            if isinstance(part, ast.Constant) and part.value in SYSTEM_PROCESSES | {"grpc"}
        ]
    return found


def test_the_system_is_assembled_by_one_builder() -> None:
    """``jlg dev``, the e2e and production-topology tests, the benchmarks and the trials start
    the system's processes through ``devstack/system.py`` alone (the environment they share
    and each process's command), so how the system starts is written once."""
    files = [
        p
        for top in ("devstack", "tests", "bench", "testkit")
        for p in sorted((ROOT / top).rglob("*.py"))
        if str(p.relative_to(ROOT)) not in {BUILDER, "tests/unit/test_layering.py"}
    ]
    assert files
    assert [hit for path in files for hit in _starts_a_process_of_the_system(path)] == []
