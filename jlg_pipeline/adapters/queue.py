"""What the paths add to the one queue (docs/design.md "One queue") and what the watchdog asks
of it. The waiting work is the sessions' own rows (``session_statements.waiting``); who is
next is ``pick.py``'s.

- :meth:`SessionQueue.record`: the request options a path carries (a message's role, a hand
  launch's batch size), kept for the session's cycle, for whichever worker claims it.
- :meth:`SessionQueue.refresh`: what the host's own writes leave for the queue to see: rows it
  cannot act on set aside, heartbeats in the future stored as now, turns brought forward.
- :meth:`SessionQueue.beat` and :meth:`SessionQueue.attendance`: each run draining the queue
  says it is alive (``jlg_worker``), and the watchdog asks whether work waits unattended and
  whether any worker is alive: it reads our tables, never Dagster's runs or events.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Engine,
    Integer,
    String,
    and_,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert

from jlg_pipeline.adapters.attempt_history import close_open_attempt
from jlg_pipeline.adapters.database import (
    argument,
    compiled,
    compiled_once,
    small_reads,
    translate_errors,
)
from jlg_pipeline.adapters.metric_counts import count_set_aside
from jlg_pipeline.adapters.pick import bring_forward, catch_up
from jlg_pipeline.adapters.session_statements import (
    claim_time,
    ms,
    readable,
    stale,
    waiting_rows,
)
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import session_queue as queued
from jlg_pipeline.adapters.tables import worker
from jlg_pipeline.domain.attempts import AttemptOutcome
from jlg_pipeline.domain.constants import TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.domain.validation import SessionId
from jlg_pipeline.log import describe, log_event

logger = logging.getLogger(__name__)

SET_ASIDE_PATH = "queue"
"""The label of ``jlg_rows_set_aside_total`` the queue counts its set-aside rows under."""
SET_ASIDE_ERROR = (
    "set aside: its time is outside what can be read (before year 1 or after 9999);"
    " set a new time to arm it again"
)
WORKER_RECORD_KEPT_S = 3600.0
"""A worker row not heard from for this long (its run died) is removed by the watchdog."""


@dataclass(frozen=True, slots=True)
class Attendance:
    """What the watchdog asks of the queue each tick."""

    unattended: bool
    """A session waits that no path is on its way to: SCHEDULED past the watchdog's grace (its
    event is late or lost), FAILED with its retry due, or IN_PROGRESS gone stale."""
    live_workers: int
    """Runs draining the queue that said so within the liveness window."""
    oldest: SessionId | None = None
    """The waiting session whose claim time came first (``services/why.py`` says what holds
    it, in the watchdog's skip reason)."""


class SessionQueue:
    """What the paths add to the queue (request options, the programmes' turns, the workers'
    heartbeats) and what the watchdog asks of it."""

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self._windows = windows or TimingWindows()
        # Compiled once a process: the watchdog runs them every tick, and building them cost
        # more Python than running them (a tick's CPU doubled when they were built each time).
        self._set_aside_sql, self._refresh_sql, self._attendance_sql = compiled_once(
            ("queue", self._windows), engine.dialect, lambda: _statements(self._windows, engine)
        )

    def beat(self, run_id: str) -> None:
        """``run_id`` drains the queue and is alive now."""
        statement = insert(worker).values(run_id=run_id[:64], beat_at=func.now())
        statement = statement.on_conflict_do_update(
            index_elements=[worker.c.run_id], set_={"beat_at": func.now()}
        )
        with translate_errors("recording a worker's heartbeat"), self._engine.begin() as conn:
            conn.execute(statement)

    def ended(self, run_id: str) -> None:
        """``run_id`` drains no more."""
        with translate_errors("recording a worker's end"), self._engine.begin() as conn:
            conn.execute(delete(worker).where(worker.c.run_id == run_id[:64]))

    def attendance(self, live_within_s: float) -> Attendance:
        """Whether work waits unattended, and how many workers beat within ``live_within_s``;
        rows of workers long dead are removed, and a beat in the future is stored as now
        (it counts as now, and ages from then)."""
        *tidy, ask = self._attendance_sql
        with translate_errors("asking the queue who attends it"), self._engine.begin() as conn:
            small_reads(conn)
            for sql in tidy:
                conn.exec_driver_sql(sql)
            row = conn.exec_driver_sql(ask, {"live_within_s": live_within_s}).one()
        oldest = None if row[2] is None else SessionId(row[2])
        return Attendance(unattended=bool(row[0]), live_workers=int(row[1]), oldest=oldest)

    def record(self, requests: Sequence[BulkRegisterRequest]) -> None:
        """Keep each request's options for its session's current cycle (a session with no
        time, deleted or unknown is left out), and bring its programme's turn forward to the
        session's time. Requests were parsed where they entered (``BulkRegisterRequest.parse``)."""
        if not requests:
            return
        # One row per session: the last request given for it (a duplicate delivery).
        requests = list({r.session_id: r for r in requests}.values())
        given = (
            func.unnest(
                literal([r.session_id for r in requests], ARRAY(BigInteger)),
                literal([r.role for r in requests], ARRAY(String)),
                literal([r.batch_size for r in requests], ARRAY(Integer)),
                literal([r.actor_user_id for r in requests], ARRAY(Integer)),
            )
            .table_valued("id", "role", "batch_size", "actor_user_id")
            .render_derived()
        )
        armed = (
            select(
                ps.c.id,
                ps.c.program_id,
                ps.c.link_generation_at,
                given.c.role,
                given.c.batch_size,
                given.c.actor_user_id,
            )
            .join_from(given, ps, ps.c.id == given.c.id)
            .where(
                ps.c.deleted_at.is_(None),
                readable(),
            )
            .cte("armed")
        )
        upserted = insert(queued).from_select(
            ["program_session_id", "cycle_at", "role", "batch_size", "actor_user_id"],
            select(
                armed.c.id,
                armed.c.link_generation_at,
                armed.c.role,
                armed.c.batch_size,
                armed.c.actor_user_id,
            ),
        )
        options = upserted.on_conflict_do_update(
            index_elements=[queued.c.program_session_id],
            set_={
                "cycle_at": upserted.excluded.cycle_at,
                "role": upserted.excluded.role,
                "batch_size": upserted.excluded.batch_size,
                "actor_user_id": upserted.excluded.actor_user_id,
                "recorded_at": func.now(),
            },
        ).cte("recorded")
        due = (
            select(armed.c.program_id, func.min(armed.c.link_generation_at))
            .group_by(armed.c.program_id)
            .add_cte(options)
        )
        with translate_errors("recording request options"), self._engine.begin() as conn:
            conn.execute(bring_forward(due))

    def refresh(self) -> list[int]:
        """What the host's own writes (and a run that died) leave for the queue to see, in one
        transaction, each step through a partial index whose cost follows the waiting work:
        rows whose time no read can load that would otherwise wait are set aside (FAILED for a
        person, with the reason, counted under ``jlg_rows_set_aside_total{path="queue"}``); a
        claim's heartbeat in the future is stored as now; and every programme with a waiting
        session, or whose time has come, has its turn come (``ready``). Returns the ids set
        aside."""
        with translate_errors("refreshing the programmes' turns"), self._engine.begin() as conn:
            small_reads(conn)
            ids = sorted(conn.exec_driver_sql(self._set_aside_sql).scalars())
            for row_id in ids:
                log_event(
                    logger,
                    logging.ERROR,
                    f"{SET_ASIDE_PATH}.row_set_aside",
                    row_id=row_id,
                    error="link_generation_at out of the readable range",
                )
            if ids:
                count_set_aside(conn, SET_ASIDE_PATH, len(ids))
            for sql in self._refresh_sql:
                conn.exec_driver_sql(sql)
        return ids


def _statements(windows: TimingWindows, engine: Engine) -> tuple[str, list[str], list[str]]:
    """The refresh's and the attendance's statements, compiled."""
    dialect = engine.dialect
    return (
        compiled(_set_aside(windows.stale_ms), dialect),
        [compiled(s, dialect) for s in (_heartbeats_ahead(), *catch_up(windows.stale_ms))],
        [compiled(s, dialect) for s in _attendance(windows)],
    )


def _attendance(windows: TimingWindows) -> list[Any]:
    """The attendance's statements: workers long dead removed, beats in the future stored as
    now, then (unattended?, live workers) for the argument ``live_within_s``."""
    late = waiting_rows(
        windows.stale_ms,
        ps.c.id,
        where=or_(
            ps.c.link_generation_status != S.SCHEDULED.value,
            ps.c.link_generation_at <= func.now() - ms(windows.watchdog_grace_ms),
        ),
    )
    within = func.make_interval(0, 0, 0, 0, 0, 0, argument("live_within_s", "FLOAT8"))
    live = select(func.count()).where(worker.c.beat_at > func.now() - within).scalar_subquery()
    waits = waiting_rows(
        windows.stale_ms, ps.c.id, claim_time(windows.stale_ms).label("claim_at")
    ).subquery()
    oldest = select(waits.c.id).order_by(waits.c.claim_at, waits.c.id).limit(1).scalar_subquery()
    return [
        delete(worker).where(
            worker.c.beat_at < func.now() - ms(round(WORKER_RECORD_KEPT_S * 1000))
        ),
        update(worker).where(worker.c.beat_at > func.now()).values(beat_at=func.now()),
        select(exists(late), live, oldest),
    ]


def _heartbeats_ahead() -> Any:
    """A claim's heartbeat in the future (the host's ``updated_at``) stored as now."""
    return (
        update(ps)
        .where(
            attempts.c.program_session_id == ps.c.id,
            attempts.c.outcome == AttemptOutcome.IN_PROGRESS.value,
            ps.c.link_generation_status == S.IN_PROGRESS.value,
            ps.c.updated_at > func.now(),
        )
        .values(updated_at=func.now())
    )


def _set_aside(stale_ms: int) -> Any:
    """FAILED, for a person, with the reason: each row whose time no read can load that would
    otherwise wait (SCHEDULED, FAILED with a retry, a stale claim, whose open attempt is closed
    as taken over); its ids. Through ix_psession_link_gen_due's two ends."""
    status = ps.c.link_generation_status
    aside = (
        update(ps)
        .where(
            ps.c.deleted_at.is_(None),
            status != S.COMPLETED.value,
            ps.c.link_generation_at.is_not(None),
            ~readable(),
            or_(
                status == S.SCHEDULED.value,
                and_(status == S.FAILED.value, ps.c.link_generation_retry_at.is_not(None)),
                stale(stale_ms),
            ),
        )
        .values(
            link_generation_status=S.FAILED.value,
            link_generation_retry_at=None,
            link_generation_last_error=SET_ASIDE_ERROR,
            updated_at=func.now(),
        )
        .returning(ps.c.id)
        .cte("set_aside")
    )
    return select(aside.c.id).add_cte(close_open_attempt(aside, "set_aside_attempt"))


def recorded_request(row: Any) -> BulkRegisterRequest | None:
    """The options recorded for the claimed cycle (its row here), the actor of its newest
    intent change when none was; a row that no longer passes the rules asks with the defaults."""
    if not hasattr(row, "role"):
        return None
    try:
        return BulkRegisterRequest.parse(row.id, row.role, row.batch_size, row.actor_user_id)
    except Exception as exc:  # noqa: BLE001 - options never stop a claimed session's call
        log_event(
            logger, logging.WARNING, "queue.options_ignored", session_id=row.id, error=describe(exc)
        )
        return BulkRegisterRequest(row.id)
