"""All SQL on ``jlg_service_view``: the row every caller of the online-session service reads
and changes (domain/service_view.py decides; this keeps it). Each change is one short
transaction that locks the row, reads the database's clock and writes what the domain decided,
so callers in every run and process see one budget, one pause and one breaker, and of callers
arriving together exactly one probes. No connection or lock is held across the call itself."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy import Connection, Engine, func, select, update
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import service_resume as resumes
from jlg_pipeline.adapters.tables import service_view as view
from jlg_pipeline.domain.constants import ONLINE_SESSION_TIMEOUT_S
from jlg_pipeline.domain.service_view import (
    MAX_SLOT_WAIT_S,
    Budget,
    Health,
    Hold,
    Turn,
    Verdict,
    ViewState,
    after_call,
    ask_again_in,
    bounded,
    give_back,
    held_by_all,
    resumed,
    take_turn,
)

ONLINE_SESSION = "online-session"
"""The row of the online-session service (bulkRegister)."""
PROBE_MARGIN_S = 5.0
"""A probe holds its right for its call's bound and this much more: a prober that dies frees it."""
WRITTEN_SINCE_S = 60.0
"""How much later than this reader's clock another caller may have written a time: a look
that finds a time past its bound by more than this stores it at its bound (a look finding
the budget's next slot or a pause a moment past it, each caller's own clock, wrote nothing:
one extra locked transaction a call cost the budget 10 % of its rate)."""
SPARE_FOR_S = 1.0
"""A turn whose claim was lost is its caller's next session's for this long after its slot."""
STATE_COLUMNS = [view.c[f.name] for f in fields(ViewState)]
CLEARED = [resumes.c.paused_until, resumes.c.down_since, resumes.c.failures]
NO_BUDGET = Budget()
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Resume:
    """One operator's clear of the view, and what it cleared."""

    at: datetime
    by: str
    paused_until: datetime | None
    down_since: datetime | None
    failures: int


@dataclass(frozen=True, slots=True)
class Look:
    """The row as it is now, and the database's clock when it was read."""

    state: ViewState
    now: datetime
    budget: Budget

    def held_until(self, patience_s: float = 0.0) -> datetime | None:
        """Until when no caller may call at all (a pause, or a probe out), or None; a pause
        that callers with ``patience_s`` wait out (domain ``ask_again_in``) holds no one."""
        held = held_by_all(self.state, self.now)
        if held is None or (ask_again_in(held, patience_s) is not None and held.hold is Hold.PAUSE):
            return None
        return held.at

    def paused(self) -> bool:
        """Whether a pause the service asked for holds now."""
        return self.state.paused(self.now)

    def pause(self) -> Turn | None:
        """A pause that holds now, as the turn every caller is given meanwhile."""
        held = held_by_all(self.state, self.now)
        return held if held is not None and held.hold is Hold.PAUSE else None

    def why_held(self) -> str:
        if self.paused():
            return "it asked for a pause"
        return "it is down; a probe is out" if self.state.down else "a probe is out"


class ServiceView:
    def __init__(
        self,
        engine: Engine,
        budget: Budget = NO_BUDGET,
        call_bound_s: float = ONLINE_SESSION_TIMEOUT_S,
        name: str = ONLINE_SESSION,
    ) -> None:
        self._engine = engine
        self.budget = budget
        self._probe_hold_s = call_bound_s + PROBE_MARGIN_S
        self._name = name
        self._spare = threading.local()

    def peek(self) -> tuple[Turn, ViewState]:
        """The turn a caller would be given now, taken by no one, and the row it was decided
        on (``jlg why``)."""
        look = self.look()
        return take_turn(look.state, self.budget, look.now, self._probe_hold_s)[0], look.state

    def take_turn(self) -> Turn:
        """What this caller may do now (domain/service_view.py ``take_turn``), taken. A turn
        that changes nothing (no budget, no probe due) is decided on a plain read: no caller
        queues behind the row's lock for it, so a caller reporting a pause gets the lock at
        once. One that changes the row (a budget's slot, a probe) is decided under the lock."""
        if self.budget.rate is None:
            look = self.look()
            turn, changed = take_turn(look.state, self.budget, look.now, self._probe_hold_s)
            if changed == look.state:
                return turn
        return self._change(
            "taking a turn at the service",
            lambda state, now: take_turn(state, self.budget, now, self._probe_hold_s),
        )

    def wait_for_turn(self, patience_s: float = MAX_SLOT_WAIT_S) -> Turn:
        """A turn to call now: its slot of the budget slept to, and asked again while the
        service holds every caller for a moment (a pause ending, a probe out) for at most
        ``patience_s`` (domain ``ask_again_in``); a WAIT if none came. No claim is held
        meanwhile. A turn this thread could not use (:meth:`not_used`) comes first."""
        spare: tuple[Turn, float] | None = getattr(self._spare, "turn", None)
        self._spare.turn = None
        if spare is not None and time.monotonic() - spare[1] < SPARE_FOR_S:
            return spare[0]
        deadline = time.monotonic() + patience_s
        while True:
            turn = self.take_turn()
            if turn.calls and turn.wait_s > 0:
                time.sleep(turn.wait_s)
            pause = ask_again_in(turn, deadline - time.monotonic())
            if pause is None:
                return turn
            time.sleep(pause)

    def pause_before_the_call(self, patience_s: float = MAX_SLOT_WAIT_S) -> datetime | None:
        """Right before a call: a pause the service asked for after this caller's turn is
        waited out when it ends within ``patience_s``, and looked at again then (a 429 to a
        call in flight may have lengthened it); a longer one's end is returned (the call is
        not to be made). None: call now."""
        deadline = time.monotonic() + patience_s
        while (held := self.look().pause()) is not None:
            wait_s = ask_again_in(held, deadline - time.monotonic())
            if wait_s is None:
                return held.at
            time.sleep(wait_s)
        return None

    def not_used(self, turn: Turn) -> None:
        """A turn whose claim was lost (another caller got the session first): a slot of the
        budget goes to this caller's next session, in this thread, if it asks within
        SPARE_FOR_S (two runs racing through the same sessions spend one slot a call, not
        two); a probe is given back."""
        if turn.verdict is Verdict.CALL:
            self._spare.turn = (turn, time.monotonic())
        else:
            self.give_back(turn)

    def give_back(self, turn: Turn) -> None:
        """A turn taken but not used: a probe's hold is freed for the next caller (a slot of
        the budget just passes)."""
        if turn.verdict is Verdict.PROBE:
            self._change("giving a turn back", lambda state, now: (None, give_back(state, turn)))

    def report(self, health: Health, retry_after_s: float | None, turn: Turn) -> ViewState:
        """What a call's result says about the service; the row after it."""
        probed = turn.verdict is Verdict.PROBE

        def change(state: ViewState, now: datetime) -> tuple[ViewState, ViewState]:
            after = after_call(
                state,
                health,
                now,
                retry_after_s,
                probed=probed,
                max_pause_s=self.budget.max_pause_s,
            )
            return after, after

        return self._change("reporting a call's result", change)

    def resume(self, by: str) -> tuple[ViewState, ViewState]:
        """An operator clears a pause or an open breaker (domain ``resumed``): the row before
        and after; the resume kept on record with what it cleared, in the same transaction."""

        def change(
            state: ViewState, now: datetime
        ) -> tuple[tuple[ViewState, ViewState], ViewState]:
            after = resumed(state, now, by)
            return (state, after), after

        def record(conn: Connection, result: tuple[ViewState, ViewState]) -> None:
            before, after = result
            conn.execute(
                insert(resumes).values(
                    name=self._name,
                    resumed_at=after.resumed_at,
                    resumed_by=by,
                    paused_until=before.paused_until,
                    down_since=before.down_since,
                    failures=before.failures,
                )
            )

        return self._change("resuming the service", change, then=record)

    def resumes(self, limit: int) -> list[Resume]:
        """The last ``limit`` resumes, newest first."""
        statement = (
            select(resumes.c.resumed_at, resumes.c.resumed_by, *CLEARED)
            .where(resumes.c.name == self._name)
            .order_by(resumes.c.id.desc())
            .limit(limit)
        )
        with translate_errors("reading the resumes"), self._engine.connect() as conn:
            return [Resume(*row) for row in conn.execute(statement)]

    def look(self) -> Look:
        """The row now (no lock, nothing changed): for the watchdog and /metrics."""
        with translate_errors("reading the service's view"), self._engine.connect() as conn:
            row = conn.execute(
                select(*STATE_COLUMNS, func.now()).where(view.c.name == self._name)
            ).first()
            if row is None:
                return Look(ViewState(), conn.execute(select(func.now())).scalar_one(), self.budget)
        now = row[-1]
        stored = ViewState(*row[:-1])
        if self._bounded(stored, now + timedelta(seconds=WRITTEN_SINCE_S)) != stored:
            # Past its bound even as a later caller sees it (not a time another caller just
            # wrote on a later clock): stored at its bound, so the bound passes. Read as "now
            # plus the bound" at every look, a pause at ``infinity`` held every caller for ever.
            self._change("bounding the service's view", lambda state, now: (None, state))
        return Look(self._bounded(stored, now), now, self.budget)

    def _change(
        self,
        action: str,
        decide: Callable[[ViewState, datetime], tuple[T, ViewState]],
        then: Callable[[Connection, T], None] | None = None,
    ) -> T:
        """``decide`` on the row, locked, on the database's clock; its new row written when it
        changed anything (most calls change nothing: no write); ``then`` in the same
        transaction."""
        with translate_errors(action), self._engine.begin() as conn:
            stored, now = self._locked(conn)
            result, changed = decide(self._bounded(stored, now), now)
            changed = self._bounded(changed, now)
            if changed != stored:
                values = {f.name: getattr(changed, f.name) for f in fields(ViewState)}
                conn.execute(update(view).where(view.c.name == self._name).values(values))
            if then is not None:
                then(conn, result)
        return result

    def _bounded(self, state: ViewState, now: datetime) -> ViewState:
        return bounded(state, self.budget, now, self._probe_hold_s)

    def _locked(self, conn: Connection) -> tuple[ViewState, datetime]:
        locked = select(*STATE_COLUMNS).where(view.c.name == self._name).with_for_update()
        row = conn.execute(locked).first()
        if row is None:
            conn.execute(insert(view).values(name=self._name).on_conflict_do_nothing())
            row = conn.execute(locked).one()
        # The clock once the row is held, not the transaction's start (now()): a caller that
        # waited for the lock would otherwise decide on a moment before the others' slots,
        # and its bound on the next slot would move a slot they just took back.
        now = conn.execute(select(func.clock_timestamp())).scalar_one()
        return ViewState(*row), now
