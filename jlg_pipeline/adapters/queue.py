"""The one queue (docs/design.md "One queue"): the waiting work is the sessions' own rows
(``session_statements.waiting``), and this module holds what we add to them and the one choice
of who is next.

- :func:`next_waiting`, the fair pick, is the target of the claim that takes the next waiting
  session (``ProgramSessionRepository.claim_next``): on-time sessions (due for at most
  ``ON_TIME_MS``) before recovery ones, except every ``RECOVERY_EVERY``-th pick, which prefers
  recovery, so neither class starves; within a class the programme served least recently
  first, then time, then id. It looks at the ``PROGRAMMES_LOOKED_AT`` programmes with work due
  that were served least recently (``jlg_programme_turn``), and at most
  ``CANDIDATES_PER_PROGRAMME`` sessions of each class in each (``CANDIDATES_WHEN_CROWDED``
  when claims in flight lock all of those), through
  ``ix_psession_link_gen_programme``: its cost follows those bounds, not the table or the
  backlog. A programme past the first ``PROGRAMMES_LOOKED_AT`` waits at most that many
  claims (each claim sends the programme it served to the back).
- :meth:`SessionQueue.record`: the request options a path carries (a message's role, a hand
  launch's batch size), kept for the session's cycle, for whichever worker claims it; and the
  programme's turn told that work falls due then.
- :meth:`SessionQueue.refresh`: ``next_due_at`` made true again for sessions armed by anyone
  (the host's own writes included); the watchdog calls it every tick.
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
    ColumnElement,
    Engine,
    Integer,
    ScalarSelect,
    String,
    and_,
    delete,
    func,
    literal,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.session_statements import ms, waiting
from jlg_pipeline.adapters.tables import class_turn, worker
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_turn as turn
from jlg_pipeline.adapters.tables import session_queue as queued
from jlg_pipeline.domain.constants import ON_TIME_MS, RECOVERY_EVERY, TimingWindows
from jlg_pipeline.domain.generation import BulkRegisterRequest
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.log import describe, log_event

logger = logging.getLogger(__name__)

PROGRAMMES_LOOKED_AT = 64
CANDIDATES_PER_PROGRAMME = 4
"""Sessions of each class a claim looks at in each programme: enough that concurrent claims on
one programme mostly find one no other is locking."""
CANDIDATES_WHEN_CROWDED = 288
"""What a claim that found all its candidates locked looks at before it says none waits: more
than the callers that can claim at once (32, JLG_GENERATION_CONCURRENCY's most, in each of the
9 runs dagster.yaml lets run at once). Cheap when none waits: its probes find nothing."""
QUEUE_INDEX_STATUSES = (S.SCHEDULED.value, S.IN_PROGRESS.value, S.FAILED.value)
"""The statuses ix_psession_link_gen_programme covers (migration 0017)."""


def in_queue_index(t: Any) -> ColumnElement[bool]:
    """The predicates of ix_psession_link_gen_programme, so the planner uses it."""
    return and_(
        t.c.deleted_at.is_(None),
        or_(*(t.c.link_generation_status == status for status in QUEUE_INDEX_STATUSES)),
    )


def next_waiting(stale_ms: int, looked_at: int = CANDIDATES_PER_PROGRAMME) -> ScalarSelect[Any]:
    """The id of the session a worker claims next (see the module's docstring), locked,
    skipping sessions another claim is locking; NULL when none of the ``looked_at`` first of
    each class in each programme is free."""
    served_first = turn.c.served.asc().nulls_first()
    programmes = (
        select(turn.c.program_id, turn.c.served)
        .where(turn.c.next_due_at <= func.now())
        .order_by(served_first, turn.c.program_id)
        .limit(PROGRAMMES_LOOKED_AT)
        .subquery("programmes")
    )
    p = ps.alias("p")
    on_time_since = func.now() - ms(ON_TIME_MS)

    def probe(recovery: bool) -> Any:
        in_class = (
            p.c.link_generation_at <= on_time_since
            if recovery
            else p.c.link_generation_at > on_time_since
        )
        return (
            select(p.c.id, p.c.link_generation_at.label("at"), literal(recovery).label("recovery"))
            .where(
                p.c.program_id == programmes.c.program_id,
                in_queue_index(p),
                waiting(stale_ms, p),
                in_class,
            )
            .order_by(p.c.link_generation_at, p.c.id)
            .limit(looked_at)
        )

    probes = union_all(probe(False), probe(True)).lateral("probes")
    # Materialized, so the probes run once per programme whatever the planner estimates: on
    # a cohort's rows not yet analyzed it drove the join from the sessions and ran them once
    # per due session (150 ms a claim at 1,000 due).
    candidates = (
        select(programmes.c.served, probes.c.id, probes.c.at, probes.c.recovery)
        .select_from(programmes.join(probes, true()))
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    # A CTE, so the sequence moves once per claim, not once per candidate.
    preferred = select((func.next_value(class_turn) % RECOVERY_EVERY == 0).label("recovery")).cte(
        "preferred_class"
    )
    return (
        select(ps.c.id)
        .select_from(candidates.join(ps, ps.c.id == candidates.c.id).join(preferred, true()))
        .where(waiting(stale_ms))
        .order_by(
            candidates.c.recovery != preferred.c.recovery,
            candidates.c.served.asc().nulls_first(),
            candidates.c.at,
            candidates.c.id,
        )
        .limit(1)
        .with_for_update(of=ps, skip_locked=True)
        .scalar_subquery()
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


class SessionQueue:
    """What the paths add to the queue (request options, the programmes' turns, the workers'
    heartbeats) and what the watchdog asks of it."""

    def __init__(self, engine: Engine, windows: TimingWindows | None = None) -> None:
        self._engine = engine
        self._windows = windows or TimingWindows()

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
        rows of workers long dead are removed."""
        windows = self._windows
        p = ps.alias("p")
        late = and_(
            in_queue_index(p),
            waiting(windows.stale_ms, p),
            or_(
                p.c.link_generation_status != S.SCHEDULED.value,
                p.c.link_generation_at <= func.now() - ms(windows.watchdog_grace_ms),
            ),
        )
        live = (
            select(func.count())
            .where(worker.c.beat_at > func.now() - ms(round(live_within_s * 1000)))
            .scalar_subquery()
        )
        gone = delete(worker).where(
            worker.c.beat_at < func.now() - ms(round(WORKER_RECORD_KEPT_S * 1000))
        )
        with translate_errors("asking the queue who attends it"), self._engine.begin() as conn:
            conn.execute(gone)
            # Not EXISTS (SELECT * …): the application role may read only some host columns.
            row = conn.execute(select(select(p.c.id).where(late).exists(), live)).one()
        return Attendance(unattended=bool(row[0]), live_workers=int(row[1]))

    def record(self, requests: Sequence[BulkRegisterRequest]) -> None:
        """Keep each request's options for its session's current cycle (a session with no
        time, deleted or unknown is left out), and tell its programme's turn that work falls
        due then. Requests were parsed where they entered (``BulkRegisterRequest.parse``)."""
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
            .where(ps.c.deleted_at.is_(None), ps.c.link_generation_at.is_not(None))
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
            conn.execute(_due_from(due))

    def refresh(self) -> None:
        """Each programme's ``next_due_at`` from its sessions: the earliest time of a waiting
        one come due, else of one to come. One read of the due sessions (through
        ix_psession_link_gen_due) and one index probe per programme whose due work is gone."""
        due = (
            select(ps.c.program_id, func.min(ps.c.link_generation_at))
            .where(
                ps.c.deleted_at.is_(None),
                ps.c.link_generation_status != S.COMPLETED.value,
                ps.c.link_generation_at <= func.now(),
                in_queue_index(ps),
            )
            .group_by(ps.c.program_id)
        )
        upcoming = (
            select(func.min(ps.c.link_generation_at))
            .where(
                ps.c.program_id == turn.c.program_id,
                in_queue_index(ps),
                ps.c.link_generation_at > func.now(),
            )
            .scalar_subquery()
        )
        has_due = (
            select(ps.c.id)
            .where(
                ps.c.program_id == turn.c.program_id,
                in_queue_index(ps),
                ps.c.link_generation_at <= func.now(),
            )
            .exists()
        )
        gone = (
            update(turn)
            .where(turn.c.next_due_at <= func.now(), ~has_due)
            .values(next_due_at=upcoming)
        )
        with translate_errors("refreshing the programmes' turns"), self._engine.begin() as conn:
            conn.execute(gone)
            conn.execute(_due_from(due, earliest=False))


def _due_from(due: Any, earliest: bool = True) -> Any:
    """Upsert (program_id, time) rows into the turns: the earlier of the two times when
    ``earliest`` (a path told of one cycle), else the time given (a refresh that saw them
    all)."""
    statement = insert(turn).from_select(["program_id", "next_due_at"], due)
    given = statement.excluded.next_due_at
    return statement.on_conflict_do_update(
        index_elements=[turn.c.program_id],
        set_={"next_due_at": func.least(turn.c.next_due_at, given) if earliest else given},
        where=turn.c.next_due_at.is_distinct_from(given),
    )


def recorded_request(row: Any) -> BulkRegisterRequest | None:
    """The options recorded for the claimed cycle (its row here), the actor of its newest
    intent change when none was; a row that no longer passes the rules asks with the defaults."""
    values = row._mapping
    if "role" not in values:
        return None
    try:
        return BulkRegisterRequest.parse(row.id, row.role, row.batch_size, row.actor_user_id)
    except Exception as exc:  # noqa: BLE001 - options never stop a claimed session's call
        log_event(
            logger, logging.WARNING, "queue.options_ignored", session_id=row.id, error=describe(exc)
        )
        return BulkRegisterRequest(row.id)
