"""ProgrammeActions: re-arm, move or clear many sessions of a programme with one guarded,
audited request (docs/design.md "Programme actions").

A dry run forecasts with the write's own rule and changes nothing. A real run records the
operation and the sessions it matches (only when they are exactly the count the admin
expected), then acts on them chunk by chunk, each chunk one statement that changes its
sessions exactly as their own PATCH would and marks each with what happened; schedule
changes go to the outbox with them, and the sync job applies them. The operation's record is
the answer, so an interrupted operation is finished, and a retried request answered, by
repeating it with the same ``Idempotency-Key``.
"""

from uuid import UUID

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.domain.errors import (
    IdempotencyKeyReused,
    InvalidInput,
    OperationNotFound,
    TooManySessions,
)
from jlg_pipeline.domain.programme_actions import (
    MAX_OPERATION_SESSIONS,
    OperationRecord,
    OperationResult,
    ProgrammeRequest,
)


class ProgrammeActions:
    def __init__(
        self,
        intents: IntentWrites,
        operations: ProgrammeOperations,
        *,
        record_schedule_changes: bool,
    ) -> None:
        self._intents = intents
        self._operations = operations
        self._record_schedule_changes = record_schedule_changes

    def act(
        self, request: ProgrammeRequest, actor_user_id: int, key: str | None = None
    ) -> OperationResult:
        """Do (or with ``dry_run`` forecast) ``request``. Raises CountChanged (nothing
        changed), TooManySessions, IdempotencyKeyReused (the key names another request)."""
        if request.dry_run:
            return self._forecast(request)
        if key is None:
            # Without one a retried request acts twice (a shift of +1 h sent twice moved
            # its sessions by 2 h), and the count guard cannot see it.
            raise InvalidInput(
                "Idempotency-Key is required for a programme action (unless dryRun): a retry "
                "with the same key answers the first result instead of acting again"
            )
        operation_id = self._operations.begin(request, actor_user_id, key)
        if operation_id is None:
            assert key is not None  # only a key can name an operation begun before
            operation_id = self._same_request(request, actor_user_id, key)
        self._finish(operation_id, request, actor_user_id)
        record = self._operations.record(operation_id)
        assert record is not None  # operations are never deleted
        return OperationResult(
            operation_id=operation_id,
            matched=record.matched,
            changed=record.changed,
            skipped=record.skipped,
            dry_run=False,
        )

    def record(self, program_id: int, operation_id: UUID) -> OperationRecord:
        record = self._operations.record(operation_id)
        if record is None or record.program_id != program_id:
            raise OperationNotFound(f"no operation {operation_id} in programme {program_id}")
        return record

    def _same_request(self, request: ProgrammeRequest, actor_user_id: int, key: str) -> UUID:
        found = self._operations.by_key(actor_user_id, key)
        assert found is not None  # begun under this key, and operations are never deleted
        operation_id, fingerprint = found
        if fingerprint != request.fingerprint():
            raise IdempotencyKeyReused(
                "this Idempotency-Key was used for another request; use a new key"
            )
        return operation_id

    def _finish(self, operation_id: UUID, request: ProgrammeRequest, actor_user_id: int) -> None:
        """Act on what is left of the operation, a chunk (one statement) at a time: what a
        request cut off left, a repeat with the same key finishes; chunks another finisher
        holds are skipped, never acted on twice."""
        while self._intents.act_on_chunk(
            operation_id,
            request.where,
            request.action.set_at,
            request.action.shift_s,
            actor_user_id,
            record_schedule_change=self._record_schedule_changes,
        ):
            pass
        self._operations.finish(operation_id)

    def _forecast(self, request: ProgrammeRequest) -> OperationResult:
        matched, shown, skipped = self._intents.forecast(
            request.where, request.action.set_at, request.action.shift_s
        )
        if matched > MAX_OPERATION_SESSIONS:
            raise TooManySessions.beyond(MAX_OPERATION_SESSIONS)
        return OperationResult(
            operation_id=None,
            matched=matched,
            changed=matched - len(skipped),
            skipped=skipped,
            dry_run=True,
            preview=shown,
        )
