"""The single schema definition (SQLAlchemy Core) and Alembic's ``target_metadata``.

``hdb_program_session`` and ``hdb_online_session`` are the host application's tables; a
standalone install creates a minimal version of them (migration 0001), a brownfield install
already has them and adopts only the additive link-generation columns (migration 0002).
The ``jlg_local_*`` tables belong to the local, PostgreSQL-backed registrar.

The ``jlg_*`` tables name a session by its id and nothing more: no foreign key, trigger or
anything else of ours sits on the host's tables (docs/design.md "A guest", migration 0010).
"""

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Sequence,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID

from jlg_pipeline.adapters.readable_time import KnownStatus, ReadableTime
from jlg_pipeline.domain.attempts import AttemptOutcome
from jlg_pipeline.domain.status import WRITTEN_STATUSES, LinkGenerationStatus

metadata = MetaData()


STATUS_VALUES = ", ".join(f"'{s.value}'" for s in WRITTEN_STATUSES)

program_session = Table(
    "hdb_program_session",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("program_id", BigInteger, nullable=False),
    Column("name", String(255), nullable=True),
    Column("starts_at", ReadableTime(), nullable=True),
    Column(
        "hdb_online_session",
        BigInteger,
        ForeignKey(
            "hdb_online_session.id", name="fk_program_session_online_session", use_alter=True
        ),
        nullable=True,
    ),
    Column("created_at", ReadableTime(), nullable=False, server_default=func.now()),
    Column("updated_at", ReadableTime(), nullable=False, server_default=func.now()),
    Column("updated_by", Integer, nullable=True),
    Column("deleted_at", ReadableTime(), nullable=True),
    # Migration 0002: the TRD's two columns, plus what fencing and visibility need.
    Column("link_generation_at", ReadableTime(), nullable=True),
    Column(
        "link_generation_status",
        KnownStatus(),
        nullable=False,
        server_default=LinkGenerationStatus.NOT_SCHEDULED.value,
    ),
    Column("link_generation_attempt", Integer, nullable=False, server_default="0"),
    Column("link_generation_last_error", Text, nullable=True),
    Column("link_generation_job_id", String(255), nullable=True),
    # Migration 0008: when a retryable failure is tried again (NULL: not by the watchdog).
    Column("link_generation_retry_at", ReadableTime(), nullable=True),
    CheckConstraint(
        f"link_generation_status IN ({STATUS_VALUES})", name="ck_psession_link_gen_status"
    ),
    Index(
        "ix_psession_link_gen_due",
        "link_generation_at",
        postgresql_where=text("deleted_at IS NULL AND link_generation_status <> 'COMPLETED'"),
    ),
    # Migration 0003: one index per tier of the sweep's candidates (fairness).
    Index(
        "ix_psession_link_gen_fresh",
        "link_generation_at",
        "id",
        postgresql_where=text(
            "deleted_at IS NULL AND link_generation_status IN ('SCHEDULED', 'IN_PROGRESS')"
        ),
    ),
    Index(
        "ix_psession_link_gen_failed",
        "link_generation_attempt",
        "link_generation_at",
        "id",
        postgresql_where=text("deleted_at IS NULL AND link_generation_status = 'FAILED'"),
    ),
    Index(
        "ix_psession_link_gen_retry",
        "link_generation_retry_at",
        "id",
        postgresql_where=text(
            "deleted_at IS NULL AND link_generation_status = 'FAILED' "
            "AND link_generation_retry_at IS NOT NULL"
        ),
    ),
    # Migration 0017: a programme's waiting sessions in time order (the fair claim's probe).
    Index(
        "ix_psession_link_gen_programme",
        "program_id",
        "link_generation_at",
        "id",
        postgresql_where=text(
            "deleted_at IS NULL "
            "AND link_generation_status IN ('SCHEDULED', 'IN_PROGRESS', 'FAILED')"
        ),
    ),
)

online_session = Table(
    "hdb_online_session",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("program_id", BigInteger, nullable=False),
    Column(
        "program_session_id",
        BigInteger,
        ForeignKey("hdb_program_session.id", name="fk_online_session_program_session"),
        nullable=False,
    ),
    Column("template", String(255), nullable=False),
    Column("provider", String(32), nullable=True),
    Column("meeting_id", String(255), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("program_id", "template", name="uq_online_session_program_id_template"),
)

local_registration = Table(
    "jlg_local_registration",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("program_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("role", String(64), nullable=False, server_default="attendee"),
    Column("status", String(20), nullable=False, server_default="ACTIVE"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("status IN ('ACTIVE', 'WITHDRAWN')", name="ck_local_registration_status"),
    UniqueConstraint(
        "program_id", "user_id", "role", name="uq_local_registration_program_user_role"
    ),
    Index("ix_local_registration_program_role", "program_id", "role", "id"),
)

local_bulk_job = Table(
    "jlg_local_bulk_job",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("program_session_id", BigInteger, nullable=False),
    Column("role", String(64), nullable=True),
    Column("batch_size", Integer, nullable=False),
    Column("actor_user_id", Integer, nullable=True),
    Column("total", Integer, nullable=False, server_default="0"),
    Column("created", Integer, nullable=False, server_default="0"),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("idempotency_key", String(200), nullable=True),
    Index("ix_local_bulk_job_session", "program_session_id"),
    Index(
        "uq_local_bulk_job_idempotency_key",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

local_join_link = Table(
    "jlg_local_join_link",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column(
        "registration_id",
        BigInteger,
        ForeignKey("jlg_local_registration.id", name="fk_local_join_link_registration"),
        nullable=False,
    ),
    Column("program_session_id", BigInteger, nullable=False),
    Column("join_url", Text, nullable=False),
    Column("bulk_job_id", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The TRD's dedupe backstop: one join link per (registration, session), repeats absorbed.
    UniqueConstraint(
        "registration_id", "program_session_id", name="uq_local_join_link_registration_session"
    ),
)

# Migration 0004: the schedule outbox (docs/design.md "Schedule sync"). One row per session whose
# desired EventBridge state is not applied yet; applied rows are deleted, so the table holds
# only pending work and the sensor's idle check reads an empty index.
schedule_change_version = Sequence("jlg_schedule_outbox_version_seq", metadata=metadata)

schedule_outbox = Table(
    "jlg_schedule_outbox",
    metadata,
    Column("program_session_id", BigInteger, primary_key=True, autoincrement=False),
    # From one sequence: a newer change always has a higher version, even after the session's
    # previous row was applied and deleted, so an applier can retire only what it applied.
    Column("version", BigInteger, nullable=False),
    Column("fire_at", ReadableTime(), nullable=True),
    Column("actor_user_id", Integer, nullable=True),
    # True once applied as "no EventBridge schedule": the sensor launches the run when due.
    Column("direct", Boolean, nullable=False, server_default="false"),
    Column("next_try_at", DateTime(timezone=True), nullable=False),
    Column("tries", Integer, nullable=False, server_default="0"),
    Column("last_error", Text, nullable=True),
    Column("changed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Migration 0006: the applier's lease. Taken and released in short transactions, so no
    # connection or lock is held across the AWS call; a newer change keeps it. The column keeps
    # the name 0006 gave it (the release before reads it); the code calls it what it is.
    Column("held_until", DateTime(timezone=True), nullable=True, key="leased_until"),
    Index("ix_schedule_outbox_due", "direct", "next_try_at"),
    Index("ix_schedule_outbox_pending_fire", "fire_at", postgresql_where=text("NOT direct")),
)

# Migration 0005: the attempt history (docs/design.md "Attempt history"). Each claim opens a row,
# each mark closes it, in the same statement as the session's state change.
ATTEMPT_OUTCOMES = tuple(outcome.value for outcome in AttemptOutcome)

generation_attempt = Table(
    "jlg_generation_attempt",
    metadata,
    Column("program_session_id", BigInteger, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("trigger", String(16), nullable=False),
    Column("run_id", String(64), nullable=True),
    Column("link_generation_at", ReadableTime(), nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("outcome", String(16), nullable=False, server_default="IN_PROGRESS"),
    Column("job_id", String(255), nullable=True),
    Column("total", Integer, nullable=True),
    Column("error", Text, nullable=True),
    CheckConstraint(
        "outcome IN (" + ", ".join(f"'{o}'" for o in ATTEMPT_OUTCOMES) + ")",
        name="ck_generation_attempt_outcome",
    ),
    # The open attempt of a session (at most one): closed by marks and reclaims.
    Index(
        "ix_generation_attempt_open",
        "program_session_id",
        postgresql_where=text("outcome = 'IN_PROGRESS'"),
    ),
)

# Migration 0006: the intent history (docs/design.md "Operators"). Every admin set/clear, written
# by the same statement as the session's UPDATE; never changed afterwards.
link_generation_change = Table(
    "jlg_link_generation_change",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("program_session_id", BigInteger, nullable=False),
    Column("changed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor_user_id", Integer, nullable=True),
    Column("link_generation_at", ReadableTime(), nullable=True),
    Column("previous_link_generation_at", ReadableTime(), nullable=True),
    # Migration 0013: the programme action the change belongs to (NULL: a one-session PATCH).
    Column("operation_id", UUID(as_uuid=True), nullable=True),
    Index("ix_link_generation_change_session", "program_session_id", "id"),
)

programme_operation = Table(
    "jlg_programme_operation",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("program_id", BigInteger, nullable=False),
    Column("actor_user_id", Integer, nullable=False),
    Column("idempotency_key", String(200), nullable=True),
    Column("fingerprint", String(64), nullable=False),
    Column("request", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("actor_user_id", "idempotency_key", name="uq_programme_operation_actor_key"),
)
"""Migration 0013: one admin request acting on a programme's sessions at once
(services/programme_actions.py)."""

programme_operation_session = Table(
    "jlg_programme_operation_session",
    metadata,
    Column(
        "operation_id",
        UUID(as_uuid=True),
        ForeignKey("jlg_programme_operation.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("program_session_id", BigInteger, primary_key=True, autoincrement=False),
    Column("outcome", String(20), nullable=True),
)
"""The sessions an operation matched when it began; ``outcome`` is written by the statement
that acts on the session (NULL: not yet acted on)."""


service_view = Table(
    "jlg_service_view",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("next_slot_at", ReadableTime(), nullable=True),
    Column("paused_until", ReadableTime(), nullable=True),
    Column("failures", Integer, nullable=False, server_default="0"),
    Column("down_since", ReadableTime(), nullable=True),
    Column("probe_until", ReadableTime(), nullable=True),
    Column("changed_at", ReadableTime(), nullable=True),
    Column("healed_at", ReadableTime(), nullable=True),
    # Migration 0014: the operator who last cleared it (``jlg service resume``), and when.
    Column("resumed_at", ReadableTime(), nullable=True),
    Column("resumed_by", String(64), nullable=True),
)
"""Migration 0011: one shared view of an external service (domain/service_view.py): its rate
budget, a pause it asked for and its breaker, read and changed by every caller. Its times are
read within what Python loads (``ReadableTime``): a person may write any value there."""


service_resume = Table(
    "jlg_service_resume",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("name", String(64), nullable=False),
    Column("resumed_at", ReadableTime(), nullable=False, server_default=func.now()),
    Column("resumed_by", String(64), nullable=False),
    Column("paused_until", ReadableTime(), nullable=True),
    Column("down_since", ReadableTime(), nullable=True),
    Column("failures", Integer, nullable=False),
    Index("ix_service_resume_name", "name", "id"),
)
"""Migration 0020: every operator's clear of a service's view (``jlg service resume``): who,
when, and the pause and breaker it cleared. Append-only for every role but its owner."""


session_queue = Table(
    "jlg_session_queue",
    metadata,
    Column("program_session_id", BigInteger, primary_key=True, autoincrement=False),
    Column("cycle_at", DateTime(timezone=True), nullable=False),
    Column("role", String(64), nullable=True),
    Column("batch_size", Integer, nullable=True),
    Column("actor_user_id", Integer, nullable=True),
    Column("recorded_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Migration 0017: a session cycle's request options, recorded by the path that armed or asked
for it (adapters/queue.py); a row whose ``cycle_at`` is not the session's time is not read."""

served_order = Sequence("jlg_queue_served_seq", metadata=metadata)
class_turn = Sequence("jlg_queue_class_seq", metadata=metadata)

programme_turn = Table(
    "jlg_programme_turn",
    metadata,
    Column("program_id", BigInteger, primary_key=True, autoincrement=False),
    Column("served", BigInteger, nullable=True),
    Column("next_due_at", DateTime(timezone=True), nullable=True),
    # Migration 0019: its turn has come (the pick reads these in served order).
    Column("ready", Boolean, nullable=False, server_default=text("false")),
    Index(
        "ix_programme_turn_ready",
        text("served NULLS FIRST"),
        "program_id",
        postgresql_where=text("ready"),
    ),
    Index("ix_programme_turn_ahead", "next_due_at", postgresql_where=text("NOT ready")),
)
"""Migration 0017: per programme, when it was last served (``served``, from
``jlg_queue_served_seq``) and when its turn comes (``next_due_at``: never later than its
sessions' next claim time, adapters/pick.py); 0019: whether it has come (``ready``)."""

worker = Table(
    "jlg_worker",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("beat_at", ReadableTime(), nullable=False),
)
"""Migration 0017: each run draining the one queue, and its last heartbeat."""


# Migration 0009: counts of closed attempts kept by the statements that close them
# (docs/design.md "Scale"). Triggers on jlg_generation_attempt append signed deltas; a reading
# folds them (adapters/metric_counts.py).
metric_count = Table(
    "jlg_metric_count",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("metric", String(32), nullable=False),
    Column("label", String(64), nullable=False),
    Column("delta", BigInteger, nullable=False),
)

lag_bucket = Table(
    "jlg_lag_bucket",
    metadata,
    Column("bound_s", Integer, primary_key=True, autoincrement=False),
)
"""The lag histogram's bounds in seconds, read by the counting trigger and the reading."""
