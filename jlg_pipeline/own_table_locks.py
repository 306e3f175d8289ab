"""What a migration does to our own tables (``jlg_*``) and the lock each statement takes there,
for ``jlg migrate --plan`` beside the host tables' (``migration_plan.py``). Nothing is refused
here: the tables are ours, but their locks still hold our own writers (a run's claim, an admin's
PATCH) for as long as a statement holds them, so the plan says which statement waits on what.
No I/O: statements come in as SQL text."""

import re

from jlg_pipeline.migration_plan import Effect, Lock, Statement, Step, described

_OURS = r'(?:"?\w+"?\.)?"?(jlg_\w+)"?(?![\w"])'
_BRIEF = (
    "catalog only; it waits for the transactions using the table, and its writers wait behind it"
)
_ONLINE = "its readers and writers go on"
_ROWS = "the rows it writes stay locked until the migration's transaction commits"

_RULES: tuple[tuple[str, str, Lock, str], ...] = (
    (
        rf"^CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_OURS}",
        "a new table",
        Lock.NONE,
        "nothing waits: no one uses it yet",
    ),
    (
        rf"^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\b.*?\bON\s+(?:ONLY\s+)?{_OURS}",
        "an index built CONCURRENTLY",
        Lock.SHARE_UPDATE_EXCLUSIVE,
        _ONLINE,
    ),
    (
        rf"^CREATE\s+(?:UNIQUE\s+)?INDEX\b.*?\bON\s+(?:ONLY\s+)?{_OURS}",
        "an index",
        Lock.SHARE,
        "its writers wait for the whole build: as long as its rows take to index",
    ),
    (
        rf"^CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\b.*?\bON\s+{_OURS}",
        "a database trigger",
        Lock.SHARE_ROW_EXCLUSIVE,
        _BRIEF,
    ),
    (
        rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?{_OURS}\s+ADD\s+COLUMN\b",
        "a new column",
        Lock.ACCESS_EXCLUSIVE,
        _BRIEF + " (a volatile default rewrites every row)",
    ),
    (
        rf"^ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?{_OURS}",
        "a change of the table",
        Lock.ACCESS_EXCLUSIVE,
        "brief, unless it validates or rewrites its rows: then as long as they take",
    ),
    (
        rf"^DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?{_OURS}",
        "the table dropped",
        Lock.ACCESS_EXCLUSIVE,
        _BRIEF,
    ),
    (
        rf"^DO\b.*?\bLOCK\s+TABLE\s+(?:ONLY\s+)?{_OURS}\s+IN\s+SHARE\s+ROW\s+EXCLUSIVE\s+MODE",
        "work in batches, each its own transaction",
        Lock.SHARE_ROW_EXCLUSIVE,
        "its writers wait for one batch at a time: as long as a batch's rows take",
    ),
    (
        rf"^LOCK\s+TABLE\s+(?:ONLY\s+)?{_OURS}\s+IN\s+SHARE\s+ROW\s+EXCLUSIVE\s+MODE",
        "the table locked",
        Lock.SHARE_ROW_EXCLUSIVE,
        "its writers wait until the migration's transaction commits",
    ),
    (rf"^INSERT\s+INTO\s+{_OURS}", "rows inserted", Lock.ROW_EXCLUSIVE, _ROWS),
    (rf"^UPDATE\s+{_OURS}", "rows updated", Lock.ROW_EXCLUSIVE, _ROWS),
    (rf"^DELETE\s+FROM\s+{_OURS}", "rows deleted", Lock.ROW_EXCLUSIVE, _ROWS),
)


def own_effect(sql: str) -> Effect | None:
    """What ``sql`` does to the table of ours it acts on, with the lock it takes there; None
    when it acts on none (a sequence, a function, a host table)."""
    text = " ".join(sql.split())
    for pattern, what, lock, note in _RULES:
        found = re.match(pattern, text, re.I)
        if found:
            return Effect(found.group(1), what, lock, note, True)
    return None


def own_steps(statements: list[Statement]) -> list[Step]:
    """The statements that act on a table of ours, each with what it does there."""
    return [
        Step(statement, (found,))
        for statement in statements
        if (found := own_effect(statement.sql)) is not None
    ]


def render_own(plan: list[Step]) -> str:
    """Our tables' part of ``jlg migrate --plan``."""
    if not plan:
        return "No statement acts on our own tables (jlg_*)."
    explained: set[str] = set()
    lines = [line for step in plan for line in described(step, explained)]
    return "\n".join([f"{len(plan)} act on our own tables (jlg_*), in this order:", *lines])
