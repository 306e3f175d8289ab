"""Alembic migrations: 0001 creates the minimal host tables of a standalone install,
0002 adds the link-generation columns (the only one a brownfield install applies)."""
