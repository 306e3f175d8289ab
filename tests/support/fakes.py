"""A fake of the external online-session service, implementing the BulkRegistrar protocol."""

import threading
import uuid
from dataclasses import dataclass, field

from jlg_pipeline.domain.models import BulkRegisterRequest, BulkRegisterResult


@dataclass
class RecordingRegistrar:
    """Records every bulkRegister call; can fail with ``error`` or block until ``release``."""

    total: int = 3
    error: Exception | None = None
    block: bool = False
    calls: list[BulkRegisterRequest] = field(default_factory=list)
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        with self._lock:
            self.calls.append(request)
        self.entered.set()
        if self.block and not self.release.wait(timeout=30):
            raise TimeoutError("test never released the fake registrar")
        if self.error is not None:
            raise self.error
        return BulkRegisterResult(job_id=f"job-{uuid.uuid4().hex[:12]}", total=self.total)
