"""All SQL on programme actions' records (``jlg_programme_operation`` and the sessions each
matched, ``jlg_programme_operation_session``). The changes themselves are written chunk by
chunk by ``intent_writes.py``, which marks each session it acted on."""

from uuid import UUID, uuid4

from sqlalchemy import Engine, func, select, true, update
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.session_statements import matching
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_operation as operations
from jlg_pipeline.adapters.tables import programme_operation_session as members
from jlg_pipeline.domain.errors import CountChanged, TooManySessions
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    OperationRecord,
    ProgrammeRequest,
    Skipped,
    skip_reason,
)
from jlg_pipeline.domain.session_state import SetOutcome


class ProgrammeOperations:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def begin(self, request: ProgrammeRequest, actor_user_id: int, key: str | None) -> UUID | None:
        """Record the operation and the sessions it matches now, in one statement, only when
        they are exactly ``request.expected_count`` (else CountChanged with the count now) and
        at most MAX_OPERATION_SESSIONS (else TooManySessions); a refusal records nothing.
        None, recording nothing, when the admin's ``key`` names an operation already
        recorded (:meth:`by_key`)."""
        operation_id = uuid4()
        begun = (
            insert(operations)
            .values(
                id=operation_id,
                program_id=request.program_id,
                actor_user_id=actor_user_id,
                idempotency_key=key,
                fingerprint=request.fingerprint(),
                request=request.as_json(),
            )
            .on_conflict_do_nothing(constraint="uq_programme_operation_actor_key")
            .returning(operations.c.id)
            .cte("begun")
        )
        matched = (
            insert(members)
            .from_select(
                ["operation_id", "program_session_id"],
                select(begun.c.id, ps.c.id)
                .select_from(begun.join(ps, true()))
                .where(*matching(request.where))
                .limit(MAX_OPERATION_SESSIONS + 1),
            )
            .returning(members.c.program_session_id)
            .cte("matched")
        )
        statement = select(
            select(begun.c.id).scalar_subquery().label("begun"),
            select(func.count()).select_from(matched).scalar_subquery().label("matched"),
        )
        with translate_errors("beginning a programme action"), self._engine.begin() as conn:
            row = conn.execute(statement).one()
            if row.begun is None:
                return None
            if row.matched > MAX_OPERATION_SESSIONS:
                raise TooManySessions.beyond(MAX_OPERATION_SESSIONS)
            if row.matched != request.expected_count:
                raise CountChanged(row.matched, request.expected_count)
        return operation_id

    def by_key(self, actor_user_id: int, key: str) -> tuple[UUID, str] | None:
        """The operation the admin's key names and the request it was made for."""
        statement = select(operations.c.id, operations.c.fingerprint).where(
            operations.c.actor_user_id == actor_user_id, operations.c.idempotency_key == key
        )
        with translate_errors("reading a programme action"), self._engine.connect() as conn:
            row = conn.execute(statement).one_or_none()
        return None if row is None else (row.id, row.fingerprint)

    def finish(self, operation_id: UUID) -> None:
        """Stamp the operation finished, once no session of it is left to act on."""
        pending = (
            select(members.c.program_session_id)
            .where(members.c.operation_id == operation_id, members.c.outcome.is_(None))
            .exists()
        )
        statement = (
            update(operations)
            .where(operations.c.id == operation_id, operations.c.finished_at.is_(None), ~pending)
            .values(finished_at=func.now())
        )
        with translate_errors("finishing a programme action"), self._engine.begin() as conn:
            conn.execute(statement)

    def record(self, operation_id: UUID) -> OperationRecord | None:
        """The operation as recorded, with what happened to its sessions so far: counted by
        the database, and only the skipped ones listed."""
        of_operation = members.c.operation_id == operation_id
        with translate_errors("reading a programme action"), self._engine.connect() as conn:
            head = conn.execute(
                select(operations).where(operations.c.id == operation_id)
            ).one_or_none()
            if head is None:
                return None
            counts: dict[str | None, int] = {
                outcome: count
                for outcome, count in conn.execute(
                    select(members.c.outcome, func.count())
                    .where(of_operation)
                    .group_by(members.c.outcome)
                )
            }
            skipped = conn.execute(
                select(members.c.program_session_id, members.c.outcome)
                .where(of_operation, members.c.outcome != SetOutcome.UPDATED.value)
                .order_by(members.c.program_session_id)
            ).all()
        return OperationRecord(
            operation_id=head.id,
            program_id=head.program_id,
            actor_user_id=head.actor_user_id,
            created_at=head.created_at,
            finished_at=head.finished_at,
            request=head.request,
            matched=sum(counts.values()),
            changed=counts.get(SetOutcome.UPDATED.value, 0),
            skipped=[
                Skipped(r.program_session_id, skip_reason(SetOutcome(r.outcome)) or "")
                for r in skipped
            ],
            pending=counts.get(None, 0),
        )
