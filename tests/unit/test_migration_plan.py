"""The rule for what a migration may do to a host table (jlg_pipeline/migration_plan.py), on
SQL text alone: what the earlier revisions did is refused, what a guest may do is allowed
with its lock, whatever the spelling (case, spacing, quoting, a schema)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.migration_plan import (
    HOST_TABLE_REVISION,
    Lock,
    Statement,
    effects,
    refusals,
    render,
    steps,
)
from jlg_pipeline.own_table_locks import own_effect, own_steps, render_own
from tests.support import earlier_schema

HOST = "hdb_program_session"


def _only(sql: str):  # type: ignore[no-untyped-def]
    [effect] = effects(sql)
    return effect


def test_what_the_earlier_revisions_did_is_refused() -> None:
    earlier = [
        "LOCK TABLE hdb_program_session, jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE",
        *earlier_schema.TRIGGERS,
        "INSERT INTO jlg_metric_count (metric, label, delta) SELECT 'sessions',"
        " link_generation_status, count(*) FROM hdb_program_session GROUP BY 2",
        "CREATE TABLE jlg_schedule_outbox (program_session_id BIGINT NOT NULL, FOREIGN KEY"
        "(program_session_id) REFERENCES hdb_program_session (id) ON DELETE CASCADE)",
    ]
    refused = refusals([Statement("0009_metric_counts", sql) for sql in earlier])
    assert [statement.sql for statement, _ in refused] == earlier
    assert {effect.what for _, effect in refused} == {
        "LOCK TABLE",
        "a trigger",
        "reads or writes its rows",
        "a foreign key to it",
    }


def test_what_a_guest_may_do_is_allowed_with_its_lock() -> None:
    table = "ALTER TABLE hdb_program_session"
    allowed = {
        f"{table} ADD COLUMN link_generation_at TIMESTAMP WITH TIME ZONE": Lock.ACCESS_EXCLUSIVE,
        f"{table} ADD COLUMN s VARCHAR(20) DEFAULT 'X' NOT NULL": Lock.ACCESS_EXCLUSIVE,
        f"{table} ADD CONSTRAINT ck CHECK (s IN ('X', 'Y')) NOT VALID": Lock.ACCESS_EXCLUSIVE,
        f"{table} ADD COLUMN t TEXT DEFAULT 'a, b'": Lock.ACCESS_EXCLUSIVE,
        f"{table} VALIDATE CONSTRAINT ck": Lock.SHARE_UPDATE_EXCLUSIVE,
        "CREATE INDEX CONCURRENTLY ix ON hdb_program_session (a) WHERE b": (
            Lock.SHARE_UPDATE_EXCLUSIVE
        ),
    }
    for sql, lock in allowed.items():
        effect = _only(sql)
        assert (effect.allowed, effect.lock) == (True, lock), sql


def test_changes_that_would_hold_or_break_the_hosts_writes_are_refused() -> None:
    for sql in (
        "CREATE INDEX ix ON hdb_program_session (a)",
        "CREATE UNIQUE INDEX ix ON hdb_program_session (a)",
        "ALTER TABLE hdb_program_session ADD COLUMN c INTEGER NOT NULL",
        "ALTER TABLE hdb_program_session ADD COLUMN c BIGSERIAL",
        "ALTER TABLE hdb_program_session ADD COLUMN c UUID DEFAULT gen_random_uuid()",
        "ALTER TABLE hdb_program_session ADD CONSTRAINT ck CHECK (a > 0)",
        "ALTER TABLE hdb_program_session ALTER COLUMN program_id TYPE TEXT",
        "ALTER TABLE hdb_program_session ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY p ON hdb_program_session USING (true)",
        "CREATE RULE r AS ON INSERT TO hdb_program_session DO NOTHING",
        "UPDATE hdb_program_session SET link_generation_status = 'X'",
        "ALTER TABLE jlg_x ADD CONSTRAINT fk FOREIGN KEY (s) REFERENCES hdb_program_session (id)",
        "DO $$ BEGIN UPDATE hdb_program_session SET title = 'x'; END $$",
        "ALTER TABLE hdb_program_session ADD COLUMN a INT, ALTER COLUMN b TYPE TEXT",
    ):
        assert not _only(sql).allowed, sql


def test_a_removal_of_ours_is_allowed_only_when_that_is_all_it_does() -> None:
    removal = (
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid ="
        " 'hdb_program_session'::regclass AND tgname = 'jlg_count_sessions_update') THEN"
        " DROP TRIGGER IF EXISTS jlg_count_sessions_update ON hdb_program_session; END IF;"
        " END $$"
    )
    assert _only(removal).allowed
    sneaky = removal.replace("END IF;", "LOCK TABLE hdb_program_session; END IF;")
    assert not _only(sneaky).allowed


def test_the_host_revision_of_a_standalone_install_is_the_hosts_own() -> None:
    creating = Statement(HOST_TABLE_REVISION, "CREATE TABLE hdb_program_session (id BIGINT)")
    assert steps([creating]) == []
    assert effects("CREATE TABLE jlg_own (id BIGINT)") == ()


def test_the_plan_names_each_lock_and_says_nothing_was_applied() -> None:
    shown = render(
        steps([Statement("0002_x", "ALTER TABLE hdb_program_session ADD COLUMN c TEXT")]), 3
    )
    assert shown.startswith("3 statement(s) to run; 1 touch the host's tables")
    assert "Nothing has been applied" in shown
    assert (
        "[0002_x] a nullable or defaulted column on hdb_program_session, lock ACCESS EXCLUSIVE"
        in shown
    )
    assert "lock_timeout" in shown


spelling = st.tuples(
    st.sampled_from(["", "public.", '"public".']),
    st.booleans(),
    st.sampled_from([" ", "  ", "\n", "\t "]),
    st.booleans(),
)


def _spelled(form: tuple[str, bool, str, bool], template: str) -> str:
    """``template`` naming the host table as ``{table}``, in the spelling ``form`` draws: a
    schema or none, quoted or not, other spaces, upper or lower case."""
    schema, quoted, space, upper = form
    table = f'{schema}"{HOST}"' if quoted else f"{schema}{HOST}"
    sql = template.format(table=table)
    return space.join((sql.upper() if upper else sql).split(" "))


@given(spelling)
def test_any_spelling_of_a_forbidden_statement_is_refused(
    form: tuple[str, bool, str, bool],
) -> None:
    for template in (
        "create trigger t after insert on {table} for each statement execute function f()",
        "lock table {table} in share row exclusive mode",
        "create index ix on {table} (a)",
        "alter table {table} add column c integer not null",
    ):
        [found] = effects(_spelled(form, template))
        assert not found.allowed, template


@given(spelling)
def test_any_spelling_of_an_allowed_statement_is_allowed(
    form: tuple[str, bool, str, bool],
) -> None:
    for template in (
        "create index concurrently ix on {table} (a)",
        "alter table {table} add column c text",
        "alter table {table} validate constraint ck",
    ):
        [found] = effects(_spelled(form, template))
        assert found.allowed, template


@given(
    st.sampled_from(["hdb_program_sessions", "my_hdb_program_session", "x.hdb_program_sessionx"])
)
def test_a_name_that_only_looks_alike_is_not_a_host_table(name: str) -> None:
    assert effects(f"CREATE TRIGGER t AFTER INSERT ON {name} EXECUTE FUNCTION f()") == ()


@pytest.mark.parametrize(
    ("sql", "table", "lock"),
    [
        ("CREATE TABLE jlg_new (id BIGINT)", "jlg_new", Lock.NONE),
        (
            "CREATE INDEX ix ON jlg_generation_attempt (run_id)",
            "jlg_generation_attempt",
            Lock.SHARE,
        ),
        (
            "CREATE INDEX CONCURRENTLY ix ON public.jlg_generation_attempt (run_id)",
            "jlg_generation_attempt",
            Lock.SHARE_UPDATE_EXCLUSIVE,
        ),
        (
            "ALTER TABLE jlg_schedule_outbox ADD COLUMN c INT",
            "jlg_schedule_outbox",
            Lock.ACCESS_EXCLUSIVE,
        ),
        ('DROP TABLE IF EXISTS "jlg_held_session"', "jlg_held_session", Lock.ACCESS_EXCLUSIVE),
        ("UPDATE jlg_worker SET beat_at = now()", "jlg_worker", Lock.ROW_EXCLUSIVE),
        ("INSERT INTO jlg_service_view (id) VALUES (1)", "jlg_service_view", Lock.ROW_EXCLUSIVE),
        (
            "LOCK TABLE jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE",
            "jlg_generation_attempt",
            Lock.SHARE_ROW_EXCLUSIVE,
        ),
        (
            "DO $$ BEGIN LOOP\n LOCK TABLE jlg_generation_attempt IN SHARE ROW EXCLUSIVE MODE;"
            " COMMIT; END LOOP; END $$",
            "jlg_generation_attempt",
            Lock.SHARE_ROW_EXCLUSIVE,
        ),
    ],
)
def test_each_statement_on_our_tables_names_its_table_and_lock(
    sql: str, table: str, lock: Lock
) -> None:
    effect = own_effect(sql)
    assert effect is not None
    assert (effect.table, effect.lock) == (table, lock)


def test_the_plan_shows_our_tables_locks_after_the_hosts() -> None:
    statements = [
        Statement("0017_x", "CREATE TABLE jlg_session_queue (id BIGINT)"),
        Statement("0017_x", "CREATE INDEX ix_q ON jlg_session_queue (id)"),
        Statement("0017_x", "CREATE SEQUENCE jlg_queue_served_seq"),
        Statement("0017_x", "CREATE INDEX CONCURRENTLY ix ON hdb_program_session (program_id)"),
    ]
    assert [s.statement.sql for s in own_steps(statements)] == [s.sql for s in statements[:2]]
    shown = render_own(own_steps(statements))
    assert "[0017_x] a new table on jlg_session_queue, lock no lock on it" in shown
    assert "[0017_x] an index on jlg_session_queue, lock SHARE" in shown
    assert render_own([]) == "No statement acts on our own tables (jlg_*)."
