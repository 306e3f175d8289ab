"""The fair pick (docs/design.md "One queue"): which waiting session the claim of the next
takes, and when each programme's turn comes (``jlg_programme_turn``).

- :func:`pick`, the target of the claim that takes the next waiting session
  (``ProgramSessionRepository.claim_next``): on-time sessions (due for at most ``ON_TIME_MS``)
  before recovery ones, except every ``RECOVERY_EVERY``-th pick, which prefers recovery, so
  neither class starves; within a class the programme served least recently first, then
  time, then id. It looks at the ``PROGRAMMES_LOOKED_AT`` programmes whose turn has come
  (``next_due_at``) that were served least recently, and at most ``CANDIDATES_PER_PROGRAMME``
  sessions of each class in each (``CANDIDATES_WHEN_CROWDED`` when claims in flight lock all
  of those), through ``ix_psession_link_gen_programme``: its cost follows those bounds, not
  the table or the backlog.
- **A programme's turn comes at its next real time**: ``next_due_at`` is never later than the
  earliest ``claim_time`` of its sessions (it may be earlier: a look then moves it again).
  Every write of ours that makes a session claimable brings its turn forward in the same
  transaction (:func:`bring_forward`: an arm, a programme action, a claim's lease, a failure's
  retry), ``SessionQueue.refresh`` does it for the host's own writes, and the pick moves a
  programme it finds with nothing to claim (failed for good, in backoff, held by live claims)
  to its next real time, or out (NULL), by the same definition, in the claim's own statement.
  So the programmes the pick looks at are the ones with work, and a claim of the next comes
  back empty only when nothing waits.
"""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    CTE,
    ColumnElement,
    ScalarSelect,
    and_,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.session_statements import (
    claim_time,
    ms,
    readable,
    waiting,
    waiting_rows,
)
from jlg_pipeline.adapters.tables import class_turn
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_turn as turn
from jlg_pipeline.domain.constants import ON_TIME_MS, RECOVERY_EVERY
from jlg_pipeline.domain.status import LinkGenerationStatus as S

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
TURN_VERSION: ColumnElement[Any] = literal_column("jlg_programme_turn.xmin")
"""The turn row's version (PostgreSQL's ``xmin``, new with every write of the row): the pick
moves a programme's turn only if no write brought it forward since the pick read it."""


def in_queue_index(t: Any) -> ColumnElement[bool]:
    """The predicates of ix_psession_link_gen_programme, so the planner uses it."""
    return and_(
        t.c.deleted_at.is_(None),
        or_(*(t.c.link_generation_status == status for status in QUEUE_INDEX_STATUSES)),
    )


@dataclass(frozen=True, slots=True)
class Pick:
    """The claim of the next's target and what its statement adds beside the claim."""

    target: ScalarSelect[Any]
    """The id of the session to claim, locked; NULL when none is free."""
    moved: CTE
    """The turns of the programmes looked at that hold nothing to claim, moved to their next
    real time (or out): one row per programme moved."""


def pick(stale_ms: int, looked_at: int = CANDIDATES_PER_PROGRAMME) -> Pick:
    """The session a worker claims next (see the module's docstring), locked, skipping
    sessions another claim is locking; NULL when none of the ``looked_at`` first of each class
    in each programme is free. The programmes looked at that hold none are moved on."""

    def turns(order: Any, *where: ColumnElement[bool]) -> Any:
        return (
            select(turn.c.program_id, turn.c.served, TURN_VERSION.label("version"))
            .where(*where)
            .order_by(*order)
            .limit(PROGRAMMES_LOOKED_AT)
        )

    # Those whose turn has come, in served order (ix_programme_turn_ready), and those whose
    # time has come since the refresh last made them ready, in the order it came
    # (ix_programme_turn_ahead, read in order: the table's statistics cannot make it a scan
    # of every programme), merged.
    either = union_all(
        turns((turn.c.served.asc().nulls_first(), turn.c.program_id), turn.c.ready),
        turns((turn.c.next_due_at,), ~turn.c.ready, turn.c.next_due_at <= func.now()),
    ).subquery("either")
    programmes = (
        select(either)
        .order_by(either.c.served.asc().nulls_first(), either.c.program_id)
        .limit(PROGRAMMES_LOOKED_AT)
        .cte("programmes")
    )
    p = ps.alias("p")
    on_time_since = func.now() - ms(ON_TIME_MS)

    def probe(recovery: bool) -> Any:
        # Each class a range of the programme's part of the index (waiting implies a time
        # come): the on-time probe never reads the sessions to come.
        key, at = in_programme(p, programmes.c.program_id)
        in_class = (
            [key <= at(on_time_since)]
            if recovery
            else [key > at(on_time_since), key <= at(func.now())]
        )
        return (
            select(p.c.id, p.c.link_generation_at.label("at"), literal(recovery).label("recovery"))
            .where(
                p.c.program_id == programmes.c.program_id,
                in_queue_index(p),
                waiting(stale_ms, p),
                *in_class,
            )
            .order_by(p.c.link_generation_at, p.c.id)
            .limit(looked_at)
        )

    probes = union_all(probe(False), probe(True)).lateral("probes")
    # Materialized, so the probes run once per programme whatever the planner estimates: on
    # a cohort's rows not yet analyzed it drove the join from the sessions and ran them once
    # per due session (150 ms a claim at 1,000 due).
    candidates = (
        select(
            programmes.c.program_id,
            programmes.c.served,
            probes.c.id,
            probes.c.at,
            probes.c.recovery,
        )
        .select_from(programmes.join(probes, true()))
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    # A CTE, so the sequence moves once per claim, not once per candidate.
    preferred = select((func.next_value(class_turn) % RECOVERY_EVERY == 0).label("recovery")).cte(
        "preferred_class"
    )
    target = (
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
    # Nothing to claim in a programme looked at: its turn moves to its sessions' next claim
    # time, unless a write brought it forward since (its version changed) or holds it now
    # (skipped: the next look moves it).
    empty = (
        select(turn.c.program_id)
        .select_from(turn)
        .join(
            programmes,
            and_(
                programmes.c.program_id == turn.c.program_id,
                programmes.c.version == TURN_VERSION,
            ),
        )
        # NOT IN over a column never NULL: one hashed look-up, not a scan per programme.
        .where(programmes.c.program_id.not_in(select(candidates.c.program_id)))
        .with_for_update(of=turn, skip_locked=True)
        .cte("empty")
    )
    # The next real time: the claim time of each session whose time has come (failures, live
    # claims), and the first time still to come, before which none of those to come can be
    # claimed (the sessions armed ahead are never read one by one: a programme holds many).
    q = ps.alias("q")
    of_programme = and_(q.c.program_id == turn.c.program_id, in_queue_index(q))
    key, at = in_programme(q, turn.c.program_id)
    come = (
        select(func.min(claim_time(stale_ms, q)))
        .where(of_programme, key <= at(func.now()))
        .scalar_subquery()
    )
    to_come = (
        select(q.c.link_generation_at)
        .where(of_programme, key > at(func.now()), readable(q))
        .order_by(q.c.link_generation_at)
        .limit(1)
        .scalar_subquery()
    )
    moved = (
        update(turn)
        .where(turn.c.program_id.in_(select(empty.c.program_id)))
        .values(next_due_at=func.least(come, to_come), ready=False)
        .returning(turn.c.program_id)
        .cte("moved")
    )
    return Pick(target, moved)


def in_programme(t: Any, program_id: Any) -> tuple[Any, Any]:
    """``t``'s (programme, time) and a function making the same of ``program_id`` and a time:
    a range of one programme's times written this way can only be read through
    ix_psession_link_gen_programme. Written on the time alone, the planner took the index of
    all times for a range it thought small (the last two minutes, a cohort in fact): 20-30 ms
    a claim at 1,000,000 sessions."""
    return tuple_(t.c.program_id, t.c.link_generation_at), lambda at: tuple_(program_id, at)


def bring_forward(due: Any) -> Any:
    """Upsert ``due`` (program_id, time) rows into the turns: each programme's turn comes at
    the earlier of the two times (``ready`` if that has come). Always a write, even when the
    time it holds is earlier: a pick that read the turn before it then leaves the turn where it
    is (``TURN_VERSION``)."""
    given = due.subquery("given")
    program_id, at = given.c
    statement = insert(turn).from_select(
        ["program_id", "next_due_at", "ready"], select(program_id, at, at <= func.now())
    )
    earlier = func.least(turn.c.next_due_at, statement.excluded.next_due_at)
    return statement.on_conflict_do_update(
        index_elements=[turn.c.program_id],
        set_={"next_due_at": earlier, "ready": earlier <= func.now()},
    )


def catch_up(stale_ms: int) -> list[Any]:
    """The statements that bring forward the turns lagging behind their sessions, each taking
    no turn another transaction holds (that one is caught up at the next call), so a claim
    never waits for them: every programme with a waiting session (the host's own writes, a run
    that died) has its turn come, and every turn whose time has come is ``ready``."""
    rows = waiting_rows(stale_ms, ps.c.program_id, ps.c.link_generation_at).subquery()
    due = (
        select(rows.c.program_id, func.min(rows.c.link_generation_at).label("at"))
        .group_by(rows.c.program_id)
        .cte("due")
    )
    behind = (
        select(turn.c.program_id, due.c.at)
        .join(due, due.c.program_id == turn.c.program_id)
        .where(or_(~turn.c.ready, turn.c.next_due_at.is_(None), turn.c.next_due_at > due.c.at))
        .with_for_update(of=turn, skip_locked=True)
        .cte("behind")
    )
    forward = (
        update(turn)
        .where(turn.c.program_id == behind.c.program_id)
        .values(next_due_at=func.least(turn.c.next_due_at, behind.c.at), ready=True)
        .cte("forward")
    )
    arrived = (
        insert(turn)
        .from_select(
            ["program_id", "next_due_at", "ready"],
            select(due.c.program_id, due.c.at, true()).where(
                due.c.program_id.not_in(select(turn.c.program_id))
            ),
        )
        .on_conflict_do_nothing()
        .add_cte(forward)
    )
    come = (
        select(turn.c.program_id)
        .where(~turn.c.ready, turn.c.next_due_at <= func.now())
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return [arrived, update(turn).where(turn.c.program_id.in_(come)).values(ready=True)]
