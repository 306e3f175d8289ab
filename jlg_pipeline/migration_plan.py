"""What a migration does to the host's tables, and the lock each statement takes there
(docs/design.md "A guest"): the one rule for what may touch ``hdb_program_session`` and
``hdb_online_session``, used by ``jlg migrate --plan`` to show it before anything runs and by
the tests to refuse any revision that breaks it.

Allowed on a host table: adding a nullable or constant-defaulted column, a CHECK constraint
added ``NOT VALID`` and validated later, an index built ``CONCURRENTLY``, and removing what an
earlier version of a revision put there. Refused: triggers, rules, policies, row security,
``LOCK``, a plain index build, a foreign key to it, any other change of its columns, and any
statement reading or writing its rows but one: :data:`BRING_BACK_UNREADABLE`, which clears the
few rows whose time no read can load. No I/O here: statements come in as SQL text."""

import re
from dataclasses import dataclass
from enum import StrEnum

HOST_TABLES = ("hdb_program_session", "hdb_online_session")
HOST_TABLE_REVISION = "0001_host_tables"
"""The standalone install's revision that creates minimal host tables; a brownfield install
is stamped past it (``jlg migrate --adopt``)."""


class Lock(StrEnum):
    """PostgreSQL's table locks, weakest first (the documentation's "Explicit Locking")."""

    NONE = "no lock on it"
    ROW_EXCLUSIVE = "ROW EXCLUSIVE"
    SHARE_UPDATE_EXCLUSIVE = "SHARE UPDATE EXCLUSIVE"
    SHARE = "SHARE"
    SHARE_ROW_EXCLUSIVE = "SHARE ROW EXCLUSIVE"
    ACCESS_EXCLUSIVE = "ACCESS EXCLUSIVE"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Effect:
    """What one statement does to one host table."""

    table: str
    what: str
    lock: Lock
    note: str
    allowed: bool


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of one revision's upgrade, as SQL."""

    revision: str
    sql: str


@dataclass(frozen=True, slots=True)
class Step:
    statement: Statement
    effects: tuple[Effect, ...]


_BRIEF = (
    "catalog only, no rewrite or scan; it waits for transactions already using the table and "
    "the host's reads and writes queue behind it until it is granted, then until the "
    "migration's transaction commits"
)
_ONLINE = "the host's reads and writes go on; it waits for transactions already running"
BRING_BACK_UNREADABLE = """
WITH unreadable AS (
    SELECT id, link_generation_at FROM hdb_program_session
    WHERE deleted_at IS NULL AND link_generation_status <> 'COMPLETED'
      AND (link_generation_at > '9999-12-30T00:00:00+00'
           OR link_generation_at < '0001-01-02T00:00:00+00')
    ORDER BY id FOR UPDATE
), cleared AS (
    UPDATE hdb_program_session AS s
    SET link_generation_at = NULL, link_generation_status = 'NOT_SCHEDULED',
        link_generation_last_error = NULL, link_generation_job_id = NULL,
        link_generation_retry_at = NULL, updated_at = now()
    FROM unreadable WHERE s.id = unreadable.id
    RETURNING s.id, unreadable.link_generation_at AS previous_at
), recorded AS (
    INSERT INTO jlg_link_generation_change
        (program_session_id, actor_user_id, link_generation_at, previous_link_generation_at)
    SELECT id, NULL, NULL,
        CASE WHEN previous_at < '0001-01-02T00:00:00+00' THEN '0001-01-02T00:00:00+00'
             ELSE '9999-12-31T00:00:00+00' END::timestamptz
    FROM cleared
)
INSERT INTO jlg_schedule_outbox (program_session_id, version, fire_at, actor_user_id, next_try_at)
SELECT id, nextval('jlg_schedule_outbox_version_seq'), NULL, NULL, now() FROM cleared
ON CONFLICT (program_session_id) DO UPDATE SET
    version = excluded.version, fire_at = NULL, actor_user_id = NULL, direct = false,
    next_try_at = now(), tries = 0, last_error = NULL, held_until = NULL
"""
"""Migration 0015's one statement over the host's rows: a session whose time lies outside what a
read can load (an older release's shift past year 9999, or the host's own write) is cleared,
with an intent-history entry (previous time shown as out of range) and a schedule delete in the
outbox. The rows are found through ``ix_psession_link_gen_due`` and locked only while it runs
(the index's partial predicate is in its WHERE); a COMPLETED or deleted row is left, as every
read survives it."""

_VOLATILE_DEFAULT = re.compile(
    r"\bDEFAULT\b.*\b(nextval|random|clock_timestamp|gen_random_uuid|uuid_generate_\w+|"
    r"timeofday)\s*\(",
    re.I,
)


def _name(table: str) -> str:
    """``table`` as it may appear in SQL: bare or quoted, bare or schema-qualified."""
    return rf'(?:"?\w+"?\.)?"?{table}"?(?![\w"])'


def _mentions(sql: str, table: str) -> bool:
    return re.search(rf'(?<![\w"]){_name(table)}', sql, re.I) is not None


def _do_body(sql: str) -> str | None:
    match = re.match(r"\s*DO\s+\$(\w*)\$(.*)\$\1\$\s*;?\s*$", sql, re.I | re.S)
    return match.group(2) if match else None


def effects(sql: str) -> tuple[Effect, ...]:
    """What ``sql`` does to each host table it names (empty when it names none)."""
    return tuple(_effect(sql, table) for table in HOST_TABLES if _mentions(sql, table))


def _effect(sql: str, table: str) -> Effect:
    text = " ".join(sql.split())
    if text.rstrip("; ") == " ".join(BRING_BACK_UNREADABLE.split()):
        return Effect(
            table,
            "clears the rows whose time no read can load, through the due index",
            Lock.ROW_EXCLUSIVE,
            "the host's reads and writes go on; only those rows are locked, while it runs",
            True,
        )
    name = _name(table)
    body = _do_body(text)
    if body is not None:
        return _removal(body, table)

    def refused(what: str, note: str, lock: Lock = Lock.UNKNOWN) -> Effect:
        return Effect(table, what, lock, note, allowed=False)

    def found(pattern: str) -> bool:
        return re.search(pattern, text, re.I) is not None

    if found(rf"\bCREATE\s+(OR\s+REPLACE\s+)?(CONSTRAINT\s+)?TRIGGER\b.*\bON\s+{name}"):
        return refused("a trigger", "it runs as the host's writing role", Lock.SHARE_ROW_EXCLUSIVE)
    if found(rf"\bCREATE\s+(OR\s+REPLACE\s+)?RULE\b.*\bON\s+{name}"):
        return refused("a rule", "it rewrites the host's own statements", Lock.ACCESS_EXCLUSIVE)
    if found(rf"\bCREATE\s+POLICY\b.*\bON\s+{name}") or found(r"\bROW\s+LEVEL\s+SECURITY\b"):
        return refused("row security", "it filters the host's own reads and writes")
    if found(rf"\bLOCK\s+(TABLE\s+)?(ONLY\s+)?{name}"):
        return refused("LOCK TABLE", "it holds the host's writes for as long as it lasts")
    if found(rf"\bREFERENCES\s+{name}"):
        return refused(
            "a foreign key to it",
            "PostgreSQL puts its triggers on the host's table, and the host's TRUNCATE fails",
            Lock.SHARE_ROW_EXCLUSIVE,
        )
    if found(rf"^CREATE\s+(UNIQUE\s+)?INDEX\b.*\bON\s+(ONLY\s+)?{name}"):
        if found(r"^CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\b"):
            return Effect(
                table, "an index built CONCURRENTLY", Lock.SHARE_UPDATE_EXCLUSIVE, _ONLINE, True
            )
        return refused(
            "an index not built CONCURRENTLY",
            "the host's writes wait for the whole build",
            Lock.SHARE,
        )
    altered = re.match(rf"^ALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(ONLY\s+)?{name}\s+(.*)$", text, re.I)
    if altered:
        return _alteration(table, altered.group(3))
    return refused(
        "reads or writes its rows",
        "a statement over the host's rows inside a migration holds them while it runs",
    )


def _top_level_comma(clause: str) -> bool:
    """Whether ``clause`` holds a comma outside parentheses and quotes: several changes in one
    ALTER TABLE, each of which would have to be judged."""
    depth, quote = 0, ""
    for char in clause:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "," and depth == 0:
            return True
    return False


def _alteration(table: str, clause: str) -> Effect:
    clause = clause.rstrip("; ")
    if _top_level_comma(clause):
        return Effect(
            table,
            "several changes in one ALTER TABLE",
            Lock.UNKNOWN,
            "write each change as its own statement, so each is judged",
            False,
        )
    if re.match(r"^ADD\s+(COLUMN\s+)", clause, re.I):
        not_null = re.search(r"\bNOT\s+NULL\b", clause, re.I)
        if not_null and not re.search(r"\bDEFAULT\b", clause, re.I):
            return Effect(
                table,
                "a NOT NULL column without a default",
                Lock.ACCESS_EXCLUSIVE,
                "the host's inserts that omit it fail",
                False,
            )
        if _VOLATILE_DEFAULT.search(clause) or re.search(
            r"\b(GENERATED|IDENTITY|SERIAL|BIGSERIAL)\b", clause, re.I
        ):
            return Effect(
                table,
                "a column whose default rewrites the table",
                Lock.ACCESS_EXCLUSIVE,
                "every row is rewritten while the host waits",
                False,
            )
        return Effect(table, "a nullable or defaulted column", Lock.ACCESS_EXCLUSIVE, _BRIEF, True)
    if re.match(r"^ADD\s+CONSTRAINT\s+\S+\s+CHECK\b.*\bNOT\s+VALID$", clause, re.I):
        return Effect(table, "a CHECK constraint NOT VALID", Lock.ACCESS_EXCLUSIVE, _BRIEF, True)
    if re.match(r"^VALIDATE\s+CONSTRAINT\s+\S+$", clause, re.I):
        return Effect(
            table,
            "validating a constraint",
            Lock.SHARE_UPDATE_EXCLUSIVE,
            "reads every row; " + _ONLINE,
            True,
        )
    return Effect(
        table,
        f"ALTER TABLE … {clause.split()[0].upper()}",
        Lock.UNKNOWN,
        "not one of the additive changes a guest may make",
        False,
    )


def _removal(body: str, table: str) -> Effect:
    """A DO block: allowed only when all it does to ``table`` is remove what an earlier
    version of a revision put there, each removal checked for first."""
    inner = [s.strip() for s in body.split(";") if _mentions(s, table)]
    name = _name(table)
    for statement in inner:
        lookup = re.search(rf"'{name}'::regclass", statement, re.I)
        dropping = re.search(
            rf"\bDROP\s+TRIGGER\s+(IF\s+EXISTS\s+)?\w+\s+ON\s+{name}", statement, re.I
        )
        if not (lookup or dropping) or re.search(
            r"\b(CREATE|LOCK|INSERT|UPDATE|DELETE|TRUNCATE)\b", statement, re.I
        ):
            return Effect(
                table,
                "a DO block",
                Lock.UNKNOWN,
                "it does more than remove what a revision put there",
                False,
            )
    return Effect(
        table,
        "removes what an earlier version of a revision put on it, where it is there",
        Lock.ACCESS_EXCLUSIVE,
        "nothing happens, and no lock is taken, where it is not; else " + _BRIEF,
        True,
    )


def steps(statements: list[Statement]) -> list[Step]:
    """The statements that touch a host table, each with what it does there. The standalone
    revision that creates the host tables is the host's own, not a guest's."""
    return [
        Step(statement, found)
        for statement in statements
        if statement.revision != HOST_TABLE_REVISION and (found := effects(statement.sql))
    ]


def refusals(statements: list[Statement]) -> list[tuple[Statement, Effect]]:
    """Every statement that breaks the rule, with what it does."""
    return [
        (step.statement, effect)
        for step in steps(statements)
        for effect in step.effects
        if not effect.allowed
    ]


def described(step: Step, explained: set[str]) -> list[str]:
    """Each of ``step``'s effects with its lock, and what that means the first time a kind
    appears (``explained`` keeps which have)."""
    lines = []
    for effect in step.effects:
        verdict = "REFUSED: " if not effect.allowed else ""
        lines.append(
            f"[{step.statement.revision}] {verdict}{effect.what} on {effect.table}, "
            f"lock {effect.lock}"
        )
        if effect.what not in explained:
            explained.add(effect.what)
            lines.append(f"    ({effect.note})")
    return lines


def render(plan: list[Step], total: int) -> str:
    """The plan as ``jlg migrate --plan`` prints it: each statement that touches a host table
    with the lock it takes there, and what that means the first time a kind appears."""
    lines = [
        f"{total} statement(s) to run; {len(plan)} touch the host's tables "
        f"({', '.join(HOST_TABLES)}), in this order. Nothing has been applied.",
    ]
    explained: set[str] = set()
    for step in plan:
        lines += ["", *described(step, explained), "    " + " ".join(step.statement.sql.split())]
    if any(effect.lock is Lock.ACCESS_EXCLUSIVE for step in plan for effect in step.effects):
        lines += [
            "",
            "ACCESS EXCLUSIVE is brief here, but it waits behind every open transaction on "
            "the table and the host's statements queue behind it meanwhile: run at a quiet "
            "moment, or bound the wait (PGOPTIONS='-c lock_timeout=5s') and run again if it "
            "gives up: what committed stays, an index left half-built is built again.",
        ]
    return "\n".join(lines)
