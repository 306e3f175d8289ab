"""Fixtures shared by every tier. Integration tests ask for ``engine`` or ``db_url``: each
test gets a database as a new clone of one migrated template would be (one a previous test
of this worker used, emptied, unless that test changed more than its rows)."""

import os
import shutil
from collections.abc import Iterator
from unittest import mock

import pytest
from dagster import DagsterInstance
from hypothesis import settings
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from devstack.aws import start_moto
from devstack.online_session import OnlineSessionService, online_session_service
from devstack.ports import free_port
from devstack.postgres import TEST_DATA_DIR
from jlg_pipeline.adapters.database import create_engine, instance_storage_url
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from testkit.fault_proxy import FaultProxy, proxied_database
from testkit.postgres import ReusedDatabases, scratch_database, server_url
from tests.support import ROOT
from tests.support.order import spread

# The tests are not a production: the code location they import and the processes they start
# may use the knobs for tests (JLG_TEST_*) and the local default database. The production
# refusals are tested with explicit settings (tests/unit/test_hardening.py).
os.environ.setdefault("JLG_ENVIRONMENT", "local")

# Property tests explore new examples on a developer's machine; CI (.ci/run sets CI=true)
# replays the same ones every time, so a landing never depends on a draw. A failure anywhere
# prints the example and the blob that reproduces it. No deadline: an example's wall time on a
# loaded 2-core machine says nothing about the property (speed is the benchmarks' business).
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


TIERS = ("unit", "integration", "e2e")
E2E_WORKERS = 2
"""Workers that run the end-to-end tests: each runs its half in ~180 s, within the suite's
length; one alone would take ~360 s."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test carries its tier's marker, from its folder: ``pytest -m unit`` runs the tier
    that needs nothing running. The end-to-end tests (a dozen, each up to a minute) are dealt to
    two workers and run first: xdist gives each worker a contiguous share of the order, and
    collected together they all fell to one worker, which then ran ~380 s while the others
    ran out of work; run last, a long one still going held the end. They wait on daemons most
    of their time (a quarter of a core each), so the other workers take the other tiers from
    the start and use the CPU they leave (Makefile, ``test``)."""
    for item in items:
        tier = next((t for t in TIERS if f"/tests/{t}/" in str(item.path)), None)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    long = [item.get_closest_marker("e2e") is not None for item in items]
    items[:] = spread(items, long, workers, among=E2E_WORKERS)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """``JLG_TEST_ADMIN_DATABASE_URL``, else the machine's server, else (or with
    ``JLG_TEST_PG=embedded``) one the suite starts under ``.pgdata/test``."""
    with server_url(
        "JLG_TEST_ADMIN_DATABASE_URL",
        ROOT / TEST_DATA_DIR,
        prefer_embedded=os.environ.get("JLG_TEST_PG") == "embedded",
    ) as url:
        yield url


@pytest.fixture(scope="session")
def template_database(pg_admin_url: str) -> Iterator[str]:
    with scratch_database(pg_admin_url, "jlg_template") as url:
        name = make_url(url).database
        assert name is not None
        yield name


@pytest.fixture(scope="session")
def reused_databases(pg_admin_url: str, template_database: str) -> Iterator[ReusedDatabases]:
    databases = ReusedDatabases(pg_admin_url, template_database)
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture
def db_url(reused_databases: ReusedDatabases) -> Iterator[str]:
    with reused_databases.lend() as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = create_engine(db_url, pool_size=20, max_overflow=20)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def repository(engine: Engine) -> ProgramSessionRepository:
    return ProgramSessionRepository(engine)


@pytest.fixture(scope="session")
def reused_dagster_databases(
    pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReusedDatabases]:
    """Dagster's storage as its instance creates it (its tables, its seed rows), made once:
    creating them in an empty database takes ~1 s and each daemon started did it again."""
    home = tmp_path_factory.mktemp("dagster_template")
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    with scratch_database(pg_admin_url, "jlg_dagster_template", migrated=False) as url:
        storage = {"DAGSTER_POSTGRES_URL": instance_storage_url(url)}
        with mock.patch.dict(os.environ, storage), DagsterInstance.from_config(str(home)):
            pass
        databases = ReusedDatabases(pg_admin_url, str(make_url(url).database))
        try:
            yield databases
        finally:
            databases.close()


@pytest.fixture
def dagster_storage_url(reused_dagster_databases: ReusedDatabases) -> Iterator[str]:
    """A Dagster instance's storage, its tables made, no run or tick in it yet."""
    with reused_dagster_databases.lend() as url:
        yield instance_storage_url(url)


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    """One moto server per worker, emptied for each test that uses it (the ``aws`` fixture,
    the end-to-end stack): stopping one waits out its server's 0.5 s poll, which a server
    per test paid ~200 times a run."""
    port = free_port()
    server = start_moto(port)
    try:
        yield port
    finally:
        server.stop()


@pytest.fixture
def online_session() -> Iterator[OnlineSessionService]:
    """The online-session stand-in on a local HTTP server, honouring Idempotency-Key."""
    with online_session_service() as stand_in:
        yield stand_in


@pytest.fixture
def proxied_db(db_url: str) -> Iterator[tuple[FaultProxy, str]]:
    """The test's database behind a relay that can fail over or go silent, and its URL."""
    proxy, url = proxied_database(db_url)
    try:
        yield proxy, url
    finally:
        proxy.close()
