"""Test support: PostgreSQL provisioning, factories and fakes shared by the tiers."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's checkout, which the tests read (docs, the kit, dagster.yaml)."""
