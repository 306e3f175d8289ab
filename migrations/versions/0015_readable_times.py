"""Times stay readable (docs/design.md "Trust boundaries", "No single answer"): a session whose
time lies outside what a read can load is brought back, cleared, with an intent-history entry.

Before the horizon (``LINK_GENERATION_HORIZON``), a programme ``shiftBy`` could move a far time
past year 9999, and PostgreSQL kept what Python cannot load: the session's GET, its changes and
the PATCH that would repair it answered 500, and so did its programme's listing. Every read now
loads such a time at a bound and shows it as out of range; this clears the ones already stored
(``migration_plan.BRING_BACK_UNREADABLE``, the one statement allowed over the host's rows).
Expand: the previous release reads the cleared rows as any other.

Revision ID: 0015_readable_times
Revises: 0014_service_resume
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

from jlg_pipeline.migration_plan import BRING_BACK_UNREADABLE

revision: str = "0015_readable_times"
down_revision: str | None = "0014_service_resume"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
phase: str = "expand"


def upgrade() -> None:
    op.execute(BRING_BACK_UNREADABLE)


def downgrade() -> None:
    """Nothing to undo: the cleared times could not be read, and the history keeps the change."""
