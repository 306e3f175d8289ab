"""inv-02: no write of the link-generation fields touches the session's online details."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.domain.attempts import Trigger
from jlg_pipeline.domain.errors import GenerationFailed, RegistrarUnavailable
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus
from jlg_pipeline.services.generation import generate_for_session
from testkit.factories import create_session, force_state, online_snapshot
from tests.support.fakes import RecordingRegistrar

S = LinkGenerationStatus


def test_every_kind_of_write_leaves_the_online_session_alone(
    engine: Engine, repository: ProgramSessionRepository
) -> None:
    sid = create_session(engine, program_id=5, template="weekly")
    # A second session of the same program with another template: the unique index that a
    # cascade re-insert would trip (23505 on uq_online_session_program_id_template).
    create_session(engine, program_id=5, template="weekly-b")
    original = online_snapshot(engine, sid)
    assert original[0] is not None

    def unchanged() -> None:
        assert online_snapshot(engine, sid) == original

    IntentWrites(engine).set_link_generation(sid, datetime.now(UTC) + timedelta(hours=1), 1)
    unchanged()
    IntentWrites(engine).set_link_generation(sid, None, 1)
    unchanged()
    force_state(engine, sid, S.SCHEDULED)
    claim = repository.claim(sid)
    assert claim is not None
    unchanged()
    repository.mark_failed(claim, "x")
    unchanged()
    claim = repository.claim(sid)
    assert claim is not None
    repository.mark_completed(claim, "job")
    unchanged()
    force_state(engine, sid, S.SCHEDULED)
    generate_for_session(
        BulkRegisterRequest.parse(sid),
        repository=repository,
        registrar=RecordingRegistrar(),
        trigger=Trigger.EVENT,
    )
    unchanged()
    force_state(engine, sid, S.SCHEDULED)
    failing = RecordingRegistrar(error=RegistrarUnavailable("down"))
    with pytest.raises(GenerationFailed):
        generate_for_session(
            BulkRegisterRequest.parse(sid),
            repository=repository,
            registrar=failing,
            trigger=Trigger.CRON,
        )
    unchanged()
