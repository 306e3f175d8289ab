"""The composition root: each adapter and service is assembled here, once, and every entry
point gets them from these functions — the web app's lifespan, the ``jlg`` CLI, the local
stack and the Dagster resources (which hand over the values the code location read into
:class:`~jlg_pipeline.config.Settings`). Nothing connects at import; AWS and HTTP clients are
made only when asked for."""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from sqlalchemy import Engine

from jlg_pipeline.adapters.database import create_engine
from jlg_pipeline.adapters.intent_writes import IntentWrites
from jlg_pipeline.adapters.programme_operations import ProgrammeOperations
from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.adapters.repository import ProgramSessionRepository
from jlg_pipeline.adapters.schedule_outbox import ScheduleOutbox
from jlg_pipeline.adapters.service_view import ServiceView
from jlg_pipeline.adapters.sqs_queue import SqsQueue, sqs_client
from jlg_pipeline.adapters.why_facts import read_facts
from jlg_pipeline.config import RegistrarKind, Settings
from jlg_pipeline.domain.constants import (
    ONLINE_SESSION_TIMEOUT_S,
    WATCHDOG_INTERVAL_S,
    TimingWindows,
)
from jlg_pipeline.domain.errors import ConfigError, SessionNotFound
from jlg_pipeline.domain.eventbridge_schedule import ScheduleTarget
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.orchestration.sweep_time import sweep_runs_at
from jlg_pipeline.services.drain import liveness_s
from jlg_pipeline.services.program_session import ProgramSessionService
from jlg_pipeline.services.programme_actions import ProgrammeActions
from jlg_pipeline.services.schedule_sync import Scheduler, ScheduleSync
from jlg_pipeline.services.why import Why, explain, why_body, why_lines


def build_engine(database_url: str, **pool: Any) -> Engine:
    """The application database's engine; ``pool`` sizes its pool (``create_engine``)."""
    return create_engine(database_url, **pool)


def build_repository(engine: Engine, windows: TimingWindows) -> ProgramSessionRepository:
    """The claims, the marks and a session's reads."""
    return ProgramSessionRepository(engine, windows)


def build_intent_writes(engine: Engine, windows: TimingWindows) -> IntentWrites:
    """The admin's writes to a session's time: a PATCH and a programme action's chunks."""
    return IntentWrites(engine, windows)


def build_scheduler(region: str | None, endpoint_url: str | None) -> Scheduler:
    """The EventBridge Scheduler adapter (boto3 loads only when it is made)."""
    from jlg_pipeline.adapters.aws_scheduler import AwsScheduler, scheduler_client

    return AwsScheduler(scheduler_client(region_name=region, endpoint_url=endpoint_url))


def scheduler_for(settings: Settings) -> Scheduler | None:
    """The EventBridge adapter, or None when the real-time path is off or its ARNs are
    missing (schedule sync then records nothing)."""
    if not (settings.scheduler_enabled and settings.scheduler_target):
        return None
    return build_scheduler(settings.aws_region, settings.aws_endpoint_url)


def build_schedule_sync(
    engine: Engine, scheduler: Scheduler | None, target: ScheduleTarget | None, *, enabled: bool
) -> ScheduleSync:
    return ScheduleSync(ScheduleOutbox(engine), scheduler, target, enabled=enabled)


def build_program_session_service(
    settings: Settings,
    engine: Engine,
    scheduler: Scheduler | None,
    *,
    sync_engine: Engine | None = None,
) -> ProgramSessionService:
    """Set/clear on ``engine``; the schedule change's fast path on ``sync_engine`` (the same
    engine by default; the web app gives it a pool of its own)."""
    sync = build_schedule_sync(
        sync_engine or engine,
        scheduler,
        settings.scheduler_target,
        enabled=settings.scheduler_enabled,
    )
    return ProgramSessionService(
        build_repository(engine, settings.windows),
        build_intent_writes(engine, settings.windows),
        sync,
    )


def build_programme_actions(
    settings: Settings, engine: Engine, sessions: ProgramSessionService
) -> ProgrammeActions:
    """Programme actions on ``engine``, recording schedule changes as ``sessions`` does."""
    return ProgrammeActions(
        build_intent_writes(engine, settings.windows),
        ProgrammeOperations(engine),
        record_schedule_changes=sessions.records_schedule_changes,
    )


@contextmanager
def build_registrar(
    kind: RegistrarKind,
    engine: Engine,
    *,
    url: str | None = None,
    token: str | None = None,
    timeout_s: float | None = None,
) -> Iterator[BulkRegistrar]:
    """The registrar ``JLG_REGISTRAR`` names: the embedded one (join links in ``engine``'s
    database) or bulkRegister over HTTP, whose client is closed when the block ends."""
    if kind is RegistrarKind.HTTP:
        # Imported here: a deployment on the embedded registrar never loads httpx.
        from jlg_pipeline.adapters.registrars.http import HttpRegistrar

        if not (url and token):
            raise ConfigError(
                "JLG_REGISTRAR=http needs JLG_ONLINE_SESSION_URL and JLG_ONLINE_SESSION_TOKEN"
            )
        with HttpRegistrar(
            url, token, timeout_s=timeout_s or ONLINE_SESSION_TIMEOUT_S
        ) as registrar:
            yield registrar
        return
    from jlg_pipeline.adapters.registrars.embedded import EmbeddedRegistrar

    yield EmbeddedRegistrar(engine)


def build_queue(
    queue_url: str, visibility_timeout_s: int, region: str | None, endpoint_url: str | None
) -> SqsQueue:
    """The JOIN_LINK_GENERATION queue (boto3 loads only when it is made)."""
    client = sqs_client(region_name=region, endpoint_url=endpoint_url)
    return SqsQueue(client, queue_url, visibility_timeout=visibility_timeout_s)


def service_command(settings: Settings, command: str, by: str) -> list[str]:
    """``jlg service show`` / ``resume``: the shared view's lines, after a resume when asked."""
    from jlg_pipeline.adapters.metrics_snapshot import read_metrics_snapshot
    from jlg_pipeline.services import service_control

    engine = build_engine(settings.database_url)
    try:
        budget = settings.online_session_budget()
        lines: list[str] = []
        view = ServiceView(engine, budget, settings.online_session_timeout_s)
        if command == "resume":
            before, _ = service_control.resume(view, by)
            was = "paused" if before.paused_until is not None else "clear"
            lines.append(f"resumed (it was {was}, breaker {'open' if before.down else 'closed'})")
        snapshot = read_metrics_snapshot(engine, budget, settings.windows)
        return lines + service_control.shown(snapshot, view.resumes(service_control.RESUMES_SHOWN))
    finally:
        engine.dispose()


def build_why(
    engine: Engine,
    windows: TimingWindows,
    view: ServiceView,
    *,
    call_bound_s: float,
    scheduler_enabled: bool,
    sweep_enabled: bool,
) -> Callable[[SessionId], Why]:
    """Why a session waits (``services/why.py``), on ``engine``, with the settings the workers
    and the watchdog run by."""

    def why(session_id: SessionId) -> Why:
        facts = read_facts(
            engine,
            session_id,
            windows,
            view,
            live_within_s=liveness_s(call_bound_s),
            scheduler_enabled=scheduler_enabled,
            sweep_at=partial(sweep_runs_at, sweep_enabled=sweep_enabled),
            watchdog_every_s=WATCHDOG_INTERVAL_S,
        )
        if facts is None:
            raise SessionNotFound(f"program session {session_id} not found")
        return explain(facts)

    return why


def why_for(settings: Settings, engine: Engine) -> Callable[[SessionId], Why]:
    """:func:`build_why` as ``settings`` configure the deployment (the API, ``jlg why``)."""
    view = ServiceView(engine, settings.online_session_budget(), settings.online_session_timeout_s)
    return build_why(
        engine,
        settings.windows,
        view,
        call_bound_s=settings.online_session_timeout_s,
        scheduler_enabled=settings.scheduler_enabled,
        sweep_enabled=settings.fallback_cron_enabled,
    )


def why_command(settings: Settings, session_id: SessionId, as_json: bool) -> list[str]:
    """``jlg why SESSION_ID [--json]``."""
    engine = build_engine(settings.database_url)
    try:
        answer = why_for(settings, engine)(session_id)
    finally:
        engine.dispose()
    return [json.dumps(why_body(answer), indent=2)] if as_json else why_lines(answer)


def resync_schedules(settings: Settings) -> int:
    """``jlg schedules resync``: mark every armed, not-yet-due session pending. It only marks:
    the sync job applies them, with its backoff and error keeping."""
    engine = build_engine(settings.database_url)
    try:
        sync = build_schedule_sync(
            engine, None, settings.scheduler_target, enabled=settings.scheduler_enabled
        )
        return sync.resync()
    finally:
        engine.dispose()
