-- The role the admin API reads Dagster's storage with, for the orchestrator's health on
-- /metrics (docs/operations.md, "Database roles"): SELECT on the five tables it reads and
-- nothing else; its sessions are read-only besides. Run once in Dagster's database, as its
-- owner, after Dagster has created its tables:
--   psql "$DAGSTER_DATABASE_URL" -f deploy/postgres/dagster-reader.sql
-- then \password jlg_dagster_reader, and give the admin API (only) JLG_DAGSTER_READER_URL.
CREATE ROLE jlg_dagster_reader LOGIN;
ALTER ROLE jlg_dagster_reader SET default_transaction_read_only = on;
GRANT USAGE ON SCHEMA public TO jlg_dagster_reader;
GRANT SELECT ON daemon_heartbeats, jobs, job_ticks, runs, run_tags TO jlg_dagster_reader;
