"""The online-session service as every caller sees it (docs/design.md "The online-session
service: one shared view"): one row per service in PostgreSQL, read and changed by every caller
in every process under a row lock, on the database clock. This module decides, from that row,
what one caller may do now (:func:`take_turn`) and what a call's result changes
(:func:`after_call`); ``adapters/service_view.py`` keeps the row. No I/O here.

- **The rate budget** (``JLG_ONLINE_SESSION_RATE``, ``JLG_ONLINE_SESSION_BURST``): a token
  bucket kept as its theoretical arrival time (GCRA): each call takes the next slot, so in any
  ``t`` seconds at most ``RATE * t + BURST`` calls start, across every run and process. A caller
  whose slot is at most ``MAX_SLOT_WAIT_S`` away waits for it (holding no claim); a later slot
  is not taken, and the session is tried again then.
- **The pause**: a ``Retry-After`` holds every caller until it ends; then one caller probes
  first while the others wait for what it learns.
- **The breaker**: ``BREAKER_FAILURES`` failures in a row that say the service is unwell
  (timeout, refused connection, 5xx, garbage) mark it down; while down one caller at a time
  probes, every ``PROBE_EVERY_S``; the first answer closes it (``healed_at``), and every session
  it held is due at once.
- **Bounds** (docs/design.md "Trust boundaries", "No single answer"): the row is shared, so one
  answer decides for every session. No time in it lies further ahead than :func:`bounded`
  allows (a pause at most ``Budget.max_pause_s``, then one probe; a probe's hold; the budget's
  next slot), whatever an answer said or a row already holds, and an operator may clear a
  pause or an open breaker (:func:`resumed`).
"""

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from jlg_pipeline.domain.errors import RegistrarRejected, RegistrarUnavailable

BREAKER_FAILURES = 3
"""Unwell answers in a row that mark the service down; a single one is a session's own luck."""
PROBE_EVERY_S = 5.0
"""While the service is down (or a pause has just ended), one caller probes this often."""
ARRIVAL_MARGIN_S = 0.2
"""How much later than its slot one call may reach the service than another (its claim, its
connection): the budget keeps that much of the rate out of its burst, so a service whose own
bucket holds R finds it not empty (the default burst of R met 21 answers 429 in 2,021 calls)."""
MAX_SLOT_WAIT_S = 5.0
"""The longest a caller waits for its slot of the budget; later, it leaves the session for
then (it holds no claim and no run slot waiting)."""
DEFAULT_PAUSE_S = 1.0
"""A 429 that says no ``Retry-After``: pause everyone this long."""
RECHECK_S = 0.25
"""How often a caller held by a probe that is out asks again: its answer frees everyone."""
DEFAULT_MAX_PAUSE_S = 900.0
"""The longest pause one answer may impose on every caller (``JLG_ONLINE_SESSION_MAX_PAUSE_S``):
a ``Retry-After`` of decades would otherwise stop every path; when it ends one probe asks again,
and a quota really spent answers with another pause."""
MAX_FAILURES_COUNTED = 1_000
"""Unwell answers in a row are counted up to here (the breaker opens at BREAKER_FAILURES)."""


class Health(StrEnum):
    """What a call's result says about the service (not about the session)."""

    ANSWERED = "answered"
    """It answered as a service does: a job, or a refusal about this one session."""
    UNWELL = "unwell"
    """A timeout, a refused connection, a 5xx or garbage."""
    THROTTLED = "throttled"
    """429, or any answer with a ``Retry-After``: everyone waits."""


def health_of(exc: BaseException | None) -> Health | None:
    """The service's health from a call's outcome (None: the call succeeded); None too for an
    error that is not the service's (a bug, the database)."""
    if exc is None:
        return Health.ANSWERED
    if isinstance(exc, RegistrarUnavailable):
        return Health.THROTTLED if exc.throttled or exc.retry_after_s is not None else Health.UNWELL
    if isinstance(exc, RegistrarRejected):
        return Health.UNWELL if exc.unwell else Health.ANSWERED
    return None


@dataclass(frozen=True, slots=True)
class Budget:
    """What callers may spend of the service: calls a second (None: no budget), how many may
    start at once, and the longest pause one of its answers may impose on all of them."""

    rate: float | None = None
    burst: float = 1.0
    max_pause_s: float = DEFAULT_MAX_PAUSE_S

    @classmethod
    def of(
        cls, rate: float | None, burst: float | None, max_pause_s: float = DEFAULT_MAX_PAUSE_S
    ) -> "Budget":
        """The budget the settings name: the burst defaults to one second's worth (at least
        one call)."""
        if rate is None:
            return cls(max_pause_s=max_pause_s)
        return cls(rate, max(burst if burst is not None else rate, 1.0), max_pause_s)

    @property
    def slot_horizon_s(self) -> float:
        """How far ahead the budget's next slot may lie: a caller takes a slot at most
        MAX_SLOT_WAIT_S away, and the slot after it is one interval and the burst further."""
        if self.rate is None:
            return 0.0
        return MAX_SLOT_WAIT_S + (self.spendable + 1) / self.rate

    @property
    def spendable(self) -> float:
        """The calls that may start at once: the burst less ``ARRIVAL_MARGIN_S`` of the rate
        (at least one), so calls that reach the service unevenly stay within RATE and BURST
        there too. Never more than the burst: the budget's bound holds as configured."""
        if self.rate is None:
            return self.burst
        return max(self.burst - self.rate * ARRIVAL_MARGIN_S, 1.0)


@dataclass(frozen=True, slots=True)
class ViewState:
    """The shared row."""

    next_slot_at: datetime | None = None
    """The budget's theoretical arrival time: the next slot, before the burst's tolerance."""
    paused_until: datetime | None = None
    """A Retry-After's end; kept after it passes until a probe answers (one probes first)."""
    failures: int = 0
    """Unwell answers in a row."""
    down_since: datetime | None = None
    """Set while the breaker is open."""
    probe_until: datetime | None = None
    """Until when the caller now probing holds the right to (or the next probe is not due)."""
    changed_at: datetime | None = None
    """When the breaker last opened or closed."""
    healed_at: datetime | None = None
    """When the breaker last closed: sessions it held are due from then."""
    resumed_at: datetime | None = None
    """When an operator last cleared a pause or the breaker (``jlg service resume``)."""
    resumed_by: str | None = None
    """Who did."""

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def paused(self, now: datetime) -> bool:
        """Whether a pause the service asked for holds at ``now``."""
        return self.paused_until is not None and self.paused_until > now

    def probing(self) -> bool:
        """Whether the next call must be a probe: the breaker is open, or a pause ended and
        nobody has heard from the service since."""
        return self.down or self.paused_until is not None

    def tokens(self, budget: Budget, now: datetime) -> float | None:
        """Calls that could start now without waiting (None: no budget)."""
        if budget.rate is None:
            return None
        if self.next_slot_at is None:
            return budget.spendable
        behind_s = (now - self.next_slot_at).total_seconds()
        return min(max(budget.spendable + behind_s * budget.rate, 0.0), budget.spendable)


class Hold(StrEnum):
    """Why a caller may not call now."""

    PAUSE = "the service asked for a pause"
    PROBE_OUT = "one caller probes"
    DOWN = "the service is down; one caller probes it"
    BUDGET = "the rate budget's next free slot"


class Verdict(StrEnum):
    CALL = "call"
    PROBE = "probe"
    """The one call that finds out whether the service is back."""
    WAIT = "wait"
    """Not now: not before ``Turn.at``."""


@dataclass(frozen=True, slots=True)
class Turn:
    verdict: Verdict
    at: datetime
    """CALL and PROBE: when to call (now, or a slot at most MAX_SLOT_WAIT_S away). WAIT: not
    before then."""
    hold: Hold | None = None
    """WAIT: why."""
    wait_s: float = 0.0
    """How long from now ``at`` is (the database's clock decided it)."""

    @property
    def calls(self) -> bool:
        return self.verdict is not Verdict.WAIT

    @property
    def reason(self) -> str:
        return self.hold.value if self.hold else ""


def ask_again_in(turn: Turn, patience_s: float) -> float | None:
    """How long a caller told to wait sleeps before it asks again, given the ``patience_s`` it
    has left; None: it stops asking, and the session is left for later (it holds no claim).
    A pause that ends within its patience is waited out, and a probe that is out is asked
    about every RECHECK_S (its answer frees everyone); a service that is down brings its
    sessions back itself when it heals, and a budget slot further than MAX_SLOT_WAIT_S is
    not waited for."""
    if turn.calls or patience_s <= 0:
        return None
    if turn.hold is Hold.PAUSE:
        return turn.wait_s if turn.wait_s <= patience_s else None
    if turn.hold is Hold.PROBE_OUT:
        return min(RECHECK_S, patience_s)
    return None


def held_by_all(state: ViewState, now: datetime) -> Turn | None:
    """The WAIT every caller is given at ``now`` whatever the budget: a pause the service asked
    for, or a probe out (the service down, or a pause just ended); None: nothing holds them."""
    if state.paused(now):
        assert state.paused_until is not None
        until, hold = state.paused_until, Hold.PAUSE
    elif state.probing() and state.probe_until is not None and state.probe_until > now:
        until, hold = state.probe_until, Hold.DOWN if state.down else Hold.PROBE_OUT
    else:
        return None
    return Turn(Verdict.WAIT, until, hold, (until - now).total_seconds())


def take_turn(
    state: ViewState, budget: Budget, now: datetime, probe_hold_s: float
) -> tuple[Turn, ViewState]:
    """What one caller may do now, and the row after it took that. ``probe_hold_s``: how long
    a probe holds its right (its call's bound and a margin: a prober that dies frees it)."""

    def turn(verdict: Verdict, when: datetime, hold: Hold | None = None) -> Turn:
        return Turn(verdict, when, hold, (when - now).total_seconds())

    state = bounded(state, budget, now, probe_hold_s)
    everyone = held_by_all(state, now)
    if everyone is not None:
        return everyone, state
    probing = state.probing()
    slot, next_slot = _slot(state.next_slot_at, budget, now)
    if (slot - now).total_seconds() > MAX_SLOT_WAIT_S:
        return turn(Verdict.WAIT, slot, Hold.BUDGET), state
    taken = replace(state, next_slot_at=next_slot)
    if probing:
        held = slot + timedelta(seconds=probe_hold_s)
        return turn(Verdict.PROBE, slot), replace(taken, probe_until=held)
    return turn(Verdict.CALL, slot), taken


def _slot(
    next_slot_at: datetime | None, budget: Budget, now: datetime
) -> tuple[datetime, datetime | None]:
    """GCRA: the earliest conforming start, and the theoretical arrival time after it."""
    if budget.rate is None:
        return now, next_slot_at
    # Rounded to the clock's microsecond on the safe side: slots never closer than 1/RATE,
    # the burst's head start never longer than (spendable - 1)/RATE, however many slots add up.
    interval = timedelta(microseconds=math.ceil(1e6 / budget.rate))
    tolerance = timedelta(microseconds=math.floor((budget.spendable - 1) * 1e6 / budget.rate))
    arrival = max(next_slot_at or now, now)
    return max(arrival - tolerance, now), arrival + interval


def give_back(state: ViewState, turn: Turn) -> ViewState:
    """A probe taken but not made (the session was not claimable): the next caller may probe
    at once instead of waiting out the hold."""
    if turn.verdict is Verdict.PROBE:
        return replace(state, probe_until=None)
    return state


def bounded(state: ViewState, budget: Budget, now: datetime, probe_hold_s: float) -> ViewState:
    """``state`` with no time further ahead of ``now`` than one answer may set: a pause at most
    ``budget.max_pause_s``, a probe's hold its call's bound (or PROBE_EVERY_S) from its slot,
    the next slot ``budget.slot_horizon_s``, and nothing that happened later than now. A row that
    holds more (an older release's, a clock stepped back, a person's write) is read as if it
    held the bound, and stored so (``adapters/service_view.py``): a bound is a time that
    passes."""

    def capped(when: datetime | None, limit_s: float) -> datetime | None:
        return None if when is None else min(when, now + timedelta(seconds=limit_s))

    return replace(
        state,
        # What happened cannot have happened later than now.
        down_since=capped(state.down_since, 0.0),
        changed_at=capped(state.changed_at, 0.0),
        healed_at=capped(state.healed_at, 0.0),
        resumed_at=capped(state.resumed_at, 0.0),
        paused_until=capped(state.paused_until, budget.max_pause_s),
        # A probe may take a slot up to MAX_SLOT_WAIT_S away, and holds its right from then.
        probe_until=capped(state.probe_until, max(probe_hold_s, PROBE_EVERY_S) + MAX_SLOT_WAIT_S),
        next_slot_at=capped(state.next_slot_at, budget.slot_horizon_s),
        failures=min(state.failures, MAX_FAILURES_COUNTED),
    )


def pause_s(retry_after_s: float | None, max_pause_s: float = DEFAULT_MAX_PAUSE_S) -> float:
    """How long a throttled answer pauses everyone: its ``Retry-After`` (DEFAULT_PAUSE_S when
    it gave none), within [0, ``max_pause_s``] whatever it said (NaN and infinities included),
    before any date arithmetic."""
    if retry_after_s is None:
        return min(DEFAULT_PAUSE_S, max_pause_s)
    if math.isnan(retry_after_s):
        return max_pause_s
    return min(max(retry_after_s, 0.0), max_pause_s)


def resumed(state: ViewState, now: datetime, by: str) -> ViewState:
    """An operator's clear (``jlg service resume``): no pause, the breaker closed (every session
    it held due at once), the next call an ordinary one; who and when kept on the row."""
    return replace(
        state,
        paused_until=None,
        failures=0,
        down_since=None,
        probe_until=None,
        changed_at=now if state.down else state.changed_at,
        healed_at=now if state.down else state.healed_at,
        resumed_at=now,
        resumed_by=by,
    )


def after_call(
    state: ViewState,
    health: Health,
    now: datetime,
    retry_after_s: float | None = None,
    *,
    probed: bool = False,
    max_pause_s: float = DEFAULT_MAX_PAUSE_S,
) -> ViewState:
    """The row after a call's result says ``health``; ``probed``: that call was the probe. A
    pause lasts at most ``max_pause_s``, whatever the answer asked for."""
    if health is Health.UNWELL:
        failures = min(state.failures + 1, MAX_FAILURES_COUNTED)
        opens = not state.down and failures >= BREAKER_FAILURES
        next_probe = now + timedelta(seconds=PROBE_EVERY_S)
        if probed:
            probe_until: datetime | None = next_probe
        elif opens:
            probe_until = max(next_probe, state.probe_until or next_probe)
        else:
            probe_until = state.probe_until
        return replace(
            state,
            failures=failures,
            down_since=now if opens else state.down_since,
            changed_at=now if opens else state.changed_at,
            probe_until=probe_until,
        )
    # It answered: whatever it said, it is there.
    healed = replace(
        state,
        failures=0,
        down_since=None,
        changed_at=now if state.down else state.changed_at,
        healed_at=now if state.down else state.healed_at,
    )
    if health is Health.THROTTLED:
        until = now + timedelta(seconds=pause_s(retry_after_s, max_pause_s))
        # A probe still out keeps its hold: one probe at a time, whoever was throttled.
        return replace(
            healed,
            # Never shortened by a later answer, never past the bound by an earlier one.
            paused_until=min(
                max(until, state.paused_until or until),
                now + timedelta(seconds=max_pause_s),
            ),
            probe_until=None if probed else state.probe_until,
        )
    # An answer never shortens a pause still running (it may be to a call made before the
    # 429); once over, the first answer ends it. A probe still out keeps its hold (one probe
    # at a time) unless this was it.
    return replace(
        healed,
        paused_until=state.paused_until if state.paused(now) else None,
        probe_until=None if probed else state.probe_until,
    )


def held_by_the_service(state: ViewState) -> bool:
    """Whether a session that just failed with the service unwell waits for the service as a
    whole (due again the moment it is back) rather than on its own backoff: the service is down,
    its failures run in a row (the others are not succeeding meanwhile), or it asked for a pause
    and no call has answered well since (429s between 5xx keep the run of failures short, and a
    session's attempts then count the service's failures: its own backoff grew past the fault)."""
    return state.down or state.failures > 1 or state.paused_until is not None
