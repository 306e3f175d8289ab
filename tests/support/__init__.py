"""Test support: PostgreSQL provisioning, factories and fakes shared by the tiers."""
