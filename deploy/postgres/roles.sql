-- The roles jlg-pipeline uses in the host application's database (docs/operations.md,
-- "Database roles"). Run once, before the first `jlg migrate --adopt`, as a superuser (or a
-- role with CREATEROLE that owns the host's tables), naming the role that owns them:
--   psql "$HOST_DATABASE_URL" -v host_owner=<owner of hdb_program_session> -f deploy/postgres/roles.sql
-- then give each role a password: \password jlg_migrator and \password jlg_app.
-- Rerun deploy/postgres/grants.sql after every `jlg migrate`.

-- The migrations (the Job in deploy/k8s/migrate-job.yaml): adding columns and building indexes
-- on the host's tables needs their owner's rights, so it is a member of the owner's role. It
-- owns the schema of the project's own tables and nothing else.
CREATE ROLE jlg_migrator LOGIN;
GRANT :"host_owner" TO jlg_migrator;
CREATE SCHEMA jlg AUTHORIZATION jlg_migrator;
ALTER ROLE jlg_migrator SET search_path = jlg, public;

-- The admin API, the code location and its runs: rows only, never DDL. Every table and
-- sequence the migrations create in the schema jlg is theirs to read and write.
CREATE ROLE jlg_app LOGIN;
ALTER ROLE jlg_app SET search_path = jlg, public;
GRANT USAGE ON SCHEMA jlg TO jlg_app;
ALTER DEFAULT PRIVILEGES FOR ROLE jlg_migrator IN SCHEMA jlg
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO jlg_app;
ALTER DEFAULT PRIVILEGES FOR ROLE jlg_migrator IN SCHEMA jlg
    GRANT USAGE, SELECT ON SEQUENCES TO jlg_app;
