"""The claim (docs/design.md "The one gate, precisely"): one conditional UPDATE … RETURNING,
decided by the database clock, that moves a claimable session to IN_PROGRESS under a new
attempt number, closes an abandoned attempt it takes over, opens its own in the attempt history
and sends its programme to the back of the turns, all or nothing. Its target is a session id
(a claim that names its session) or the fair pick (``pick.py``: the claim of the next)."""

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Dialect,
    and_,
    false,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert as upsert

from jlg_pipeline.adapters.attempt_history import close_open_attempt
from jlg_pipeline.adapters.database import argument as database_argument
from jlg_pipeline.adapters.database import compiled
from jlg_pipeline.adapters.intent_history import newest_actor
from jlg_pipeline.adapters.pick import Pick
from jlg_pipeline.adapters.queue import recorded_request
from jlg_pipeline.adapters.session_statements import S, claimable, ms
from jlg_pipeline.adapters.tables import generation_attempt as attempts
from jlg_pipeline.adapters.tables import program_session as ps
from jlg_pipeline.adapters.tables import programme_turn as turn
from jlg_pipeline.adapters.tables import served_order
from jlg_pipeline.adapters.tables import session_queue as queued
from jlg_pipeline.domain.attempts import Claim
from jlg_pipeline.domain.constants import TimingWindows

ARGUMENTS = {"session_id": "BIGINT", "trigger": "VARCHAR", "run_id": "VARCHAR"}
"""What a claim is given at each call; every other value of the statement is written into it
(``database.compiled``), so PostgreSQL plans it once per connection (a generic plan of a
prepared statement) instead of for every claim: with the constants as parameters it kept a
custom plan, 1.2-2 ms a claim."""


def argument(name: str) -> ColumnElement[Any]:
    """The claim's argument ``name`` (of ARGUMENTS)."""
    return database_argument(name, ARGUMENTS[name])


def to_claim(row: Any) -> Claim:
    """The claim a claim statement's row stands for."""
    return Claim(
        session_id=row.id,
        program_id=row.program_id,
        attempt=row.link_generation_attempt,
        link_generation_at=row.link_generation_at,
        claimed_at=row.claimed_at,
        request=recorded_request(row),
    )


def claim_statement(
    target: ColumnElement[int] | Pick, windows: TimingWindows, dialect: Dialect
) -> tuple[str, dict[str, Any]]:
    """The claim of the session ``target`` names, compiled: its SQL and parameters (none: a
    call gives only ``ARGUMENTS``). A
    :class:`Pick` (the claim of the next) brings the options recorded for its cycle and
    always answers one row: the claim's columns (NULL when none) and how many programmes'
    turns it moved on (``moved``)."""
    picked = target if isinstance(target, Pick) else None
    claimed = (
        update(ps)
        .where(
            ps.c.id == (target.target if isinstance(target, Pick) else target),
            claimable(windows),
        )
        .values(
            link_generation_status=S.IN_PROGRESS.value,
            link_generation_attempt=ps.c.link_generation_attempt + 1,
            # updated_by is left alone: it names the admin who last changed the intent,
            # and a trigger's actorUserId is whatever a queue message says.
            updated_at=func.now(),
        )
        .returning(
            ps.c.id,
            ps.c.program_id,
            ps.c.link_generation_attempt,
            ps.c.link_generation_at,
            func.now().label("claimed_at"),
        )
        .cte("claimed")
    )
    # The same statement closes an abandoned attempt (a stale reclaim) and opens this
    # one: the history and the row change together or not at all.
    reclaimed = close_open_attempt(claimed, "reclaimed")
    opened = (
        insert(attempts)
        .from_select(
            [
                "program_session_id",
                "attempt",
                "trigger",
                "run_id",
                "link_generation_at",
                "claimed_at",
            ],
            select(
                claimed.c.id,
                claimed.c.link_generation_attempt,
                argument("trigger"),
                argument("run_id"),
                claimed.c.link_generation_at,
                claimed.c.claimed_at,
            ),
        )
        .cte("opened")
    )
    # Every claim sends its programme to the back of the turns (adapters/pick.py), and
    # its turn comes again no later than this claim's lease ends.
    serving = upsert(turn).from_select(
        ["program_id", "served", "next_due_at", "ready"],
        select(
            claimed.c.program_id,
            func.next_value(served_order),
            func.now() + ms(windows.stale_ms),
            false(),
        ),
    )
    earlier = func.least(turn.c.next_due_at, serving.excluded.next_due_at)
    served = serving.on_conflict_do_update(
        index_elements=[turn.c.program_id],
        set_={
            "served": serving.excluded.served,
            "next_due_at": earlier,
            "ready": earlier <= func.now(),
        },
    ).cte("served")
    if picked is None:
        statement = select(claimed).add_cte(reclaimed, opened, served)
    else:
        one = select(literal(1).label("one")).subquery("one")
        statement = (
            select(
                claimed,
                queued.c.role,
                queued.c.batch_size,
                func.coalesce(queued.c.actor_user_id, newest_actor(claimed.c.id)).label(
                    "actor_user_id"
                ),
                select(func.count()).select_from(picked.moved).scalar_subquery().label("moved"),
            )
            .select_from(
                one.outerjoin(claimed, true()).outerjoin(
                    queued,
                    and_(
                        queued.c.program_session_id == claimed.c.id,
                        queued.c.cycle_at == claimed.c.link_generation_at,
                    ),
                )
            )
            .add_cte(reclaimed, opened, served, picked.moved)
        )
    # The gate runs the compiled SQL directly: SQLAlchemy's execute path cost more
    # per claim than the database did (docs/performance.md).
    return compiled(statement, dialect), {}
