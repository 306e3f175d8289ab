-- What jlg_app may do with the host application's own tables (docs/operations.md, "Database
-- roles"): read the columns the module reads, and write only the link-generation columns the
-- migrations added and the two audit columns an admin's change stamps. Nothing else of the
-- host's rows, and nothing at all of hdb_online_session. Run after every `jlg migrate`, as
-- the host tables' owner (it only grants; running it twice changes nothing):
--   psql "$HOST_DATABASE_URL" -f deploy/postgres/grants.sql
GRANT SELECT (
    id, program_id, updated_at, updated_by, deleted_at,
    link_generation_at, link_generation_status, link_generation_attempt,
    link_generation_last_error, link_generation_job_id, link_generation_retry_at
) ON hdb_program_session TO jlg_app;
GRANT UPDATE (
    updated_at, updated_by,
    link_generation_at, link_generation_status, link_generation_attempt,
    link_generation_last_error, link_generation_job_id, link_generation_retry_at
) ON hdb_program_session TO jlg_app;
