"""Adapters: the database schema and repository, the registrars, and (later) AWS clients."""
