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
  earliest ``claim_time`` of its sessions. Every write of ours that makes a session claimable
  brings its turn forward in the same transaction (:func:`bring_forward`: an arm, a programme
  action, a claim's lease, a failure's retry), ``SessionQueue.refresh`` does it for the host's
  own writes, and the pick moves a programme it finds with nothing to claim (failed for good,
  in backoff, held by live claims) to its next real time, or out (NULL), by the same
  definition, in the claim's own statement. So the programmes the pick looks at are the ones
  with work, and a claim of the next comes back empty only when nothing waits.
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
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.session_statements import claim_time, ms, waiting
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
    programmes = (
        select(turn.c.program_id, turn.c.served, TURN_VERSION.label("version"))
        .where(turn.c.next_due_at <= func.now())
        .order_by(turn.c.served.asc().nulls_first(), turn.c.program_id)
        .limit(PROGRAMMES_LOOKED_AT)
        .cte("programmes")
    )
    p = ps.alias("p")
    on_time_since = func.now() - ms(ON_TIME_MS)

    def probe(recovery: bool) -> Any:
        # Each class a range of the index (waiting implies a time come): the on-time probe
        # never reads the programme's sessions to come.
        in_class = (
            p.c.link_generation_at <= on_time_since
            if recovery
            else and_(p.c.link_generation_at > on_time_since, p.c.link_generation_at <= func.now())
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
    q = ps.alias("q")
    next_time = (
        select(func.min(claim_time(stale_ms, q)))
        .where(q.c.program_id == turn.c.program_id, in_queue_index(q))
        .scalar_subquery()
    )
    moved = (
        update(turn)
        .where(turn.c.program_id.in_(select(empty.c.program_id)))
        .values(next_due_at=next_time)
        .returning(turn.c.program_id)
        .cte("moved")
    )
    return Pick(target, moved)


def bring_forward(due: Any) -> Any:
    """Upsert ``due`` (program_id, time) rows into the turns: each programme's turn comes at
    the earlier of the two times. Always a write, even when the time it holds is earlier: a
    pick that read the turn before it then leaves the turn where it is (``TURN_VERSION``)."""
    statement = insert(turn).from_select(["program_id", "next_due_at"], due)
    return statement.on_conflict_do_update(
        index_elements=[turn.c.program_id],
        set_={"next_due_at": func.least(turn.c.next_due_at, statement.excluded.next_due_at)},
    )
