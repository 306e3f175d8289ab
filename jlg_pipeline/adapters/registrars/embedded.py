"""The embedded default registrar: join links kept in this database's own tables.

It stands where the online-session service would: every ACTIVE registration of the
session's program (for the role, or every role when none is given) gets one join link,
in batches, each batch its own transaction, with the unique index on
(registration, session) absorbing repeats so a re-run creates nothing twice. A request
carrying a cycle's idempotency key that an earlier job already took answers that job (and
finishes it, if the earlier call died half-way) instead of starting another.
"""

import secrets
import uuid

from sqlalchemy import Engine, and_, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import local_bulk_job, local_join_link, local_registration
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.domain.constants import DEFAULT_REGISTRAR_BATCH_SIZE
from jlg_pipeline.domain.errors import RegistrarRejected
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult

JOIN_URL_BASE = "https://join.local.invalid/s"


class EmbeddedRegistrar:
    def __init__(self, engine: Engine, *, join_url_base: str = JOIN_URL_BASE) -> None:
        self._engine = engine
        self._join_url_base = join_url_base.rstrip("/")

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        session_id, role, actor = request.session_id, request.role, request.actor_user_id
        batch_size = request.batch_size or DEFAULT_REGISTRAR_BATCH_SIZE
        job_id = str(uuid.uuid4())

        with translate_errors("starting a local bulk job"), self._engine.begin() as conn:
            program_id = conn.execute(
                select(ps.c.program_id).where(ps.c.id == session_id, ps.c.deleted_at.is_(None))
            ).scalar_one_or_none()
            if program_id is None:
                raise RegistrarRejected(f"no program session {session_id} to register for")
            started = conn.execute(
                pg_insert(local_bulk_job)
                .values(
                    id=job_id,
                    program_session_id=session_id,
                    role=role,
                    batch_size=batch_size,
                    actor_user_id=actor,
                    idempotency_key=request.idempotency_key,
                )
                .on_conflict_do_nothing(
                    index_elements=["idempotency_key"],
                    index_where=local_bulk_job.c.idempotency_key.is_not(None),
                )
                .returning(local_bulk_job.c.id)
            ).scalar_one_or_none()
            if started is None:
                earlier = conn.execute(
                    select(local_bulk_job).where(
                        local_bulk_job.c.idempotency_key == request.idempotency_key
                    )
                ).one()
                if earlier.finished_at is not None:
                    return BulkRegisterResult(job_id=earlier.id, total=earlier.total, created=0)
                job_id = earlier.id

        eligible = and_(
            local_registration.c.program_id == program_id,
            local_registration.c.status == "ACTIVE",
            *([local_registration.c.role == role] if role is not None else []),
        )
        total = created = 0
        after_id = 0
        while True:
            batch = (
                select(local_registration.c.id)
                .where(eligible, local_registration.c.id > after_id)
                .order_by(local_registration.c.id)
                .limit(batch_size)
                .cte("batch")
            )
            token = func.md5(func.concat(literal(secrets.token_hex(16)), batch.c.id))
            inserted = (
                pg_insert(local_join_link)
                .from_select(
                    ["registration_id", "program_session_id", "join_url", "bulk_job_id"],
                    select(
                        batch.c.id,
                        literal(session_id),
                        func.concat(f"{self._join_url_base}/{session_id}/", token),
                        literal(job_id),
                    ),
                )
                .on_conflict_do_nothing(index_elements=["registration_id", "program_session_id"])
                .returning(local_join_link.c.id)
                .cte("inserted")
            )
            summary = select(
                select(func.count()).select_from(batch).scalar_subquery(),
                select(func.max(batch.c.id)).scalar_subquery(),
                select(func.count()).select_from(inserted).scalar_subquery(),
            )
            with translate_errors("registering a batch"), self._engine.begin() as conn:
                in_batch, last_id, new = conn.execute(summary).one()
            total += in_batch
            created += new
            if in_batch < batch_size:
                break
            after_id = last_id

        with translate_errors("finishing a local bulk job"), self._engine.begin() as conn:
            conn.execute(
                update(local_bulk_job)
                .where(local_bulk_job.c.id == job_id)
                .values(total=total, created=created, finished_at=func.now())
            )
        return BulkRegisterResult(job_id=job_id, total=total, created=created)
