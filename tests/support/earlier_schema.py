"""What the earlier versions of revisions 0004-0006 and 0009 put on the host's table, written
down as they made it, so a test can build a database those versions migrated and upgrade it
(revision 0010 removes all of it)."""

from sqlalchemy import Engine, text

SESSION_COUNTS = """
CREATE FUNCTION jlg_count_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', label, -sum(delta) FROM jlg_metric_count WHERE metric = 'sessions'
        GROUP BY label HAVING sum(delta) <> 0;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', link_generation_status, count(*) FROM new_rows
        WHERE deleted_at IS NULL GROUP BY link_generation_status;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', link_generation_status, -count(*) FROM old_rows
        WHERE deleted_at IS NULL GROUP BY link_generation_status;
    ELSE
        INSERT INTO jlg_metric_count (metric, label, delta)
        SELECT 'sessions', status, sum(change) FROM (
            SELECT link_generation_status AS status, -1 AS change FROM old_rows
            WHERE deleted_at IS NULL
            UNION ALL
            SELECT link_generation_status, 1 FROM new_rows WHERE deleted_at IS NULL
        ) AS changes
        GROUP BY status HAVING sum(change) <> 0;
    END IF;
    RETURN NULL;
END $$
"""

TRIGGERS = [
    f"CREATE TRIGGER jlg_count_sessions_{event.lower()} AFTER {event} ON hdb_program_session "
    f"REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION jlg_count_sessions()"
    for event, tables in (
        ("INSERT", "NEW TABLE AS new_rows"),
        ("UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
        ("DELETE", "OLD TABLE AS old_rows"),
    )
] + [
    "CREATE TRIGGER jlg_count_sessions_truncate AFTER TRUNCATE ON hdb_program_session "
    "FOR EACH STATEMENT EXECUTE FUNCTION jlg_count_sessions()"
]

FOREIGN_KEYS = {
    "jlg_schedule_outbox": "fk_schedule_outbox_program_session",
    "jlg_generation_attempt": "fk_generation_attempt_program_session",
    "jlg_link_generation_change": "fk_link_generation_change_program_session",
}


def restore(engine: Engine) -> None:
    """Put back on a database at 0009 what the earlier versions made: the session-count
    function and triggers, its starting counts, the foreign keys, and a counting function
    without a search path of its own."""
    with engine.begin() as conn:
        conn.execute(text(SESSION_COUNTS))
        for statement in TRIGGERS:
            conn.execute(text(statement))
        for table, key in FOREIGN_KEYS.items():
            conn.execute(
                text(
                    f"ALTER TABLE {table} ADD CONSTRAINT {key} FOREIGN KEY (program_session_id)"
                    " REFERENCES hdb_program_session (id) ON DELETE CASCADE"
                )
            )
        conn.execute(text("ALTER FUNCTION jlg_count_attempts() RESET search_path"))
        conn.execute(
            text(
                "INSERT INTO jlg_metric_count (metric, label, delta) SELECT 'sessions',"
                " link_generation_status, count(*) FROM hdb_program_session"
                " WHERE deleted_at IS NULL GROUP BY 2"
            )
        )


def left_behind(engine: Engine) -> list[str]:
    """Whatever of the above is still there."""
    with engine.connect() as conn:
        triggers = conn.execute(
            text(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'hdb_program_session'::regclass"
                " AND tgconstrrelid <> 'hdb_online_session'::regclass"
            )
        ).scalars()
        keys = conn.execute(
            text(
                "SELECT conname FROM pg_constraint WHERE contype = 'f'"
                " AND confrelid = 'hdb_program_session'::regclass"
                " AND conrelid <> 'hdb_online_session'::regclass"
            )
        ).scalars()
        functions = conn.execute(
            text("SELECT proname FROM pg_proc WHERE proname = 'jlg_count_sessions'")
        ).scalars()
        unpinned = conn.execute(
            text(
                "SELECT 'jlg_count_attempts without a search_path' FROM pg_proc"
                " WHERE proname = 'jlg_count_attempts' AND proconfig IS NULL"
            )
        ).scalars()
        return [*triggers, *keys, *functions, *unpinned]
