"""The provider seam (TRD iface-05, OQ-JLG-104): generation depends on this and nothing else."""

from typing import Protocol

from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult


class BulkRegistrar(Protocol):
    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        """Register every eligible registrant of the session for the role; at-least-once
        safe (repeats create no duplicate join links). A request with an ``idempotency_key``
        already seen answers that call's job instead of starting another.

        Raises :class:`~jlg_pipeline.domain.errors.RegistrarUnavailable` when retrying may
        help and :class:`~jlg_pipeline.domain.errors.RegistrarRejected` when it will not.
        """
        ...
