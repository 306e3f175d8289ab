"""The locks a migration holds while it runs, sampled from PostgreSQL (``pg_locks``), and
the tables it rewrote (a new ``relfilenode``): for the upgrade trial and the migrations' cost
check. A lock shorter than a sample (20 ms) may go unseen; a longer one is timed to it."""

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import Engine, text

from jlg_pipeline.adapters.database import create_engine

MIGRATOR = "jlg-migrate-measured"
"""The application_name a measured migration's connections carry."""
SAMPLE_S = 0.02
WRITERS_WAIT = {
    "ShareLock",
    "ShareRowExclusiveLock",
    "ExclusiveLock",
    "AccessExclusiveLock",
}
"""The table locks a plain INSERT, UPDATE or DELETE waits behind."""


def tagged(url: str) -> str:
    """``url`` with the measured migrator's application_name."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}application_name={MIGRATOR}"


@dataclass(frozen=True)
class Held:
    relation: str
    mode: str
    rows: int
    seconds: float

    @property
    def blocks_writers(self) -> bool:
        return self.mode in WRITERS_WAIT

    def __str__(self) -> str:
        return f"{self.mode} on {self.relation} ({self.rows:,} rows): {self.seconds * 1000:.0f} ms"


@dataclass
class Sampled:
    held: dict[tuple[str, str, str], tuple[float, float, int]] = field(default_factory=dict)
    """(transaction, relation, mode): first and last seen, rows. Per transaction, since a
    lock is released at its transaction's end: a migration working in batches takes the same
    lock once per batch, and a writer waits at most one batch."""
    rewritten: list[str] = field(default_factory=list)

    def locks(self) -> list[Held]:
        """The longest hold of each lock seen on a table with rows (alembic's own
        bookkeeping left out), longest first."""
        longest: dict[tuple[str, str], Held] = {}
        for (_, relation, mode), (first, last, rows) in self.held.items():
            if rows > 0 and relation != "alembic_version":
                seen = longest.get((relation, mode))
                if seen is None or last - first > seen.seconds:
                    longest[(relation, mode)] = Held(relation, mode, rows, last - first)
        return sorted(longest.values(), key=lambda h: -h.seconds)


@contextlib.contextmanager
def sampled(url: str) -> Iterator[Sampled]:
    """Samples the locks the migrator's connections (``tagged(url)``) hold while the block
    runs; on leaving, which of the schema's tables got a new file (were rewritten). The tables
    are analysed first: their rows come from the statistics, as a count would queue behind the
    migration's own locks."""
    engine = create_engine(url, pool_size=2, max_overflow=0)
    result = Sampled()
    stop = threading.Event()
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))
        before = _files(engine)
        sampler = threading.Thread(target=_sample, args=(engine, result, stop), daemon=True)
        sampler.start()
        try:
            yield result
        finally:
            stop.set()
            sampler.join(timeout=10)
        after = _files(engine)
        result.rewritten = sorted(t for t, f in before.items() if after.get(t, f) != f)
    finally:
        engine.dispose()


def _files(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            name: int(node)
            for name, node in conn.execute(
                text(
                    "SELECT relname, relfilenode FROM pg_class WHERE relkind = 'r'"
                    " AND relnamespace = 'public'::regnamespace"
                )
            ).all()
        }


def _sample(engine: Engine, result: Sampled, stop: threading.Event) -> None:
    with engine.connect() as conn:
        while not stop.is_set():
            now = time.monotonic()
            rows = conn.execute(
                text(
                    "SELECT l.virtualtransaction, c.relname, l.mode,"
                    " greatest(c.reltuples, 0)::bigint"
                    " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " JOIN pg_class c ON c.oid = l.relation"
                    " WHERE a.application_name = :name AND l.granted"
                    " AND l.locktype = 'relation' AND c.relkind IN ('r', 'p')"
                    " AND c.relnamespace = 'public'::regnamespace"
                ),
                {"name": MIGRATOR},
            ).all()
            conn.rollback()
            for transaction, relation, mode, tuples in rows:
                key = (transaction, relation, mode)
                first, _, _ = result.held.get(key, (now, now, 0))
                result.held[key] = (first, now, int(tuples))
            stop.wait(SAMPLE_S)
