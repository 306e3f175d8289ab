"""A generation in its own process, for tests that stop or kill it: runs the gate on one
session with a registrar that takes ``seconds``, then prints the outcome as JSON.

    python -m tests.support.slow_generation DB_URL SESSION_ID SECONDS STALE_MS
"""

import json
import sys
import time

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest, BulkRegisterResult
from jlg_pipeline.services.generation import generate_for_session


class SlowRegistrar:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def bulk_register(self, request: BulkRegisterRequest) -> BulkRegisterResult:
        print("dispatched", flush=True)
        time.sleep(self.seconds)
        return BulkRegisterResult(job_id="slow-job", total=1)


def main() -> None:
    url, session_id, seconds, stale_ms = sys.argv[1:5]
    engine = create_engine(url)
    outcome = generate_for_session(
        BulkRegisterRequest.parse(int(session_id)),
        repository=ProgramSessionRepository(engine, TimingWindows(stale_ms=int(stale_ms))),
        registrar=SlowRegistrar(float(seconds)),
        trigger=Trigger.EVENT,
    )
    print(json.dumps({"result": outcome.result.value, "attempt": outcome.attempt}), flush=True)
    engine.dispose()


if __name__ == "__main__":
    main()
