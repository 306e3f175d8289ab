"""Alembic migrations: 0001 creates the minimal host tables of a standalone install (a
brownfield install is stamped past it); every later revision only adds to the host's tables
what a guest may (docs/design.md "A guest", ``jlg_pipeline/migration_plan.py``) and creates
the project's own. ``host_index.py`` builds an index on a host table as a guest does."""
