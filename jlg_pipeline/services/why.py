"""Why is it waiting? (docs/design.md "Why is it waiting"): one answer for any session, from the
facts the claim itself decides on (``adapters/why_facts.py`` reads them with the queue's own
predicates), never a re-derivation of them. :func:`explain` says whether it waits now, every
hold on it with the time it ends, and the next thing that happens to it; a failure's "who tries
again" is ``after_failure``'s one rule. The API (``GET .../link-generation/why``), ``jlg why``
and the watchdog's skip reason all show this answer."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from jlg_pipeline.domain.attempts import AttemptOutcome, AttemptRecord
from jlg_pipeline.domain.retries import RETRY_BUDGET_S
from jlg_pipeline.domain.service_view import Hold, Verdict
from jlg_pipeline.domain.session_state import LinkGenerationState
from jlg_pipeline.domain.status import LinkGenerationStatus as S
from jlg_pipeline.domain.why import ATTEMPTS_SHOWN, Facts
from jlg_pipeline.services.after_failure import By, after_failure_of


class HoldKind(StrEnum):
    """What holds a session; each hold ends at a time, or only when a person acts."""

    DELETED = "deleted"
    NOT_SCHEDULED = "not scheduled"
    COMPLETED = "completed"
    SET_ASIDE = "set aside"
    FAILED_FOR_GOOD = "failed for good"
    NOT_DUE = "not due"
    BACKOFF = "backoff"
    CLAIM_IN_FLIGHT = "claim in flight"
    SCHEDULER_OFF = "scheduler off"
    SERVICE_PAUSE = "service pause"
    SERVICE_DOWN = "service down"
    SERVICE_BUDGET = "service budget"
    PROGRAMME_TURN = "programme turn"
    NO_WORKER = "no worker"


SWEPT = (HoldKind.FAILED_FOR_GOOD, HoldKind.SCHEDULER_OFF)
"""Holds only the sweep ends, at its next start, while it is on."""
SERVICE_HOLDS = {
    Hold.PAUSE: HoldKind.SERVICE_PAUSE,
    Hold.DOWN: HoldKind.SERVICE_DOWN,
    Hold.PROBE_OUT: HoldKind.SERVICE_DOWN,
    Hold.BUDGET: HoldKind.SERVICE_BUDGET,
}


@dataclass(frozen=True, slots=True)
class Held:
    kind: HoldKind
    until: datetime | None
    """When it ends; None: only a person ends it (or nothing times it: the programme's turn)."""
    detail: str
    by_person: bool = False
    """Only a person ends it."""


@dataclass(frozen=True, slots=True)
class Why:
    session: LinkGenerationState
    now: datetime
    readable: bool
    waits_now: bool
    claim_at: datetime | None
    holds: tuple[Held, ...]
    next_at: datetime | None
    """When the next thing happens to it; None: nothing does until a person acts."""
    next: str
    """The next thing, in one line: "the queue at …", "the sweep at …", "nothing: a person …"."""
    attempts: tuple[AttemptRecord, ...]

    @property
    def ends_last(self) -> Held | None:
        """Of the timed holds, the one that ends last (the session waits for all of them)."""
        timed = [h for h in self.holds if h.until is not None]
        return max(timed, key=lambda h: h.until or self.now) if timed else None


def explain(facts: Facts) -> Why:
    """Why ``facts.session`` is not generated yet, and what happens to it next."""
    holds = _own_holds(facts)
    if not any(h.by_person for h in holds) and not _settled(facts.session):
        holds += _shared_holds(facts)
    next_at, next_ = _next(facts, holds)
    return Why(
        session=facts.session,
        now=facts.now,
        readable=facts.readable,
        waits_now=facts.waits_now,
        claim_at=facts.claim_at,
        holds=tuple(holds),
        next_at=next_at,
        next=next_,
        attempts=facts.attempts[:ATTEMPTS_SHOWN],
    )


def _settled(s: LinkGenerationState) -> bool:
    return s.deleted or s.status in (S.COMPLETED, S.NOT_SCHEDULED) or s.link_generation_at is None


def _own_holds(facts: Facts) -> list[Held]:
    """What the session's own row holds it by: its status, time, backoff or claim."""
    s, now = facts.session, facts.now
    at = s.link_generation_at
    if s.deleted:
        return [Held(HoldKind.DELETED, None, "the program session is soft-deleted", True)]
    if s.status is S.COMPLETED:
        done = next((a for a in facts.attempts if a.outcome is AttemptOutcome.COMPLETED), None)
        by = "" if done is None or done.run_id is None else f" by run {done.run_id}"
        when = "" if done is None or done.finished_at is None else f" at {_at(done.finished_at)}"
        return [Held(HoldKind.COMPLETED, None, f"generated this cycle{when}{by}", True)]
    if s.status is S.UNKNOWN:
        return [
            Held(
                HoldKind.SET_ASIDE,
                None,
                "its status is none of the five (the host's write): no claim takes it",
                True,
            )
        ]
    if s.status is S.NOT_SCHEDULED or at is None:
        return [Held(HoldKind.NOT_SCHEDULED, None, "no link-generation time is set", True)]
    if not facts.readable:
        return [
            Held(
                HoldKind.SET_ASIDE,
                None,
                "its time is outside what can be read (before year 1 or after 9999): no claim "
                "takes it",
                True,
            )
        ]
    error = f"; last error: {s.last_error}" if s.last_error else ""
    if s.status is S.FAILED and s.retry_at is None:
        after = after_failure_of(False, None, now, facts.sweep_at)
        return [
            Held(
                HoldKind.FAILED_FOR_GOOD,
                after.at,
                f"attempt {s.attempt} failed{error}. {after.text}",
                after.by is By.PERSON,
            )
        ]
    if s.status is S.FAILED and facts.claim_at is not None and facts.claim_at > now:
        wait_s = float(math.ceil((facts.claim_at - now).total_seconds()))
        after = after_failure_of(True, wait_s, now, facts.sweep_at)
        until = at + timedelta(seconds=RETRY_BUDGET_S)
        return [
            Held(
                HoldKind.BACKOFF,
                facts.claim_at,
                f"attempt {s.attempt} failed{error}. {after.text} (retried so until {_at(until)})",
            )
        ]
    lease = facts.lease_ends_at
    if s.status is S.IN_PROGRESS and lease is not None and lease > now:
        open_ = [a for a in facts.attempts if a.outcome is AttemptOutcome.IN_PROGRESS]
        run = "a claim" if not open_ or open_[0].run_id is None else f"run {open_[0].run_id}"
        since = f" since {_at(open_[0].claimed_at)}" if open_ else ""
        return [
            Held(
                HoldKind.CLAIM_IN_FLIGHT,
                lease,
                f"{run} holds its claim{since}; it goes stale at {_at(lease)}",
            )
        ]
    if s.status is S.SCHEDULED and at > now:
        return [Held(HoldKind.NOT_DUE, at, f"its time is {_at(at)}")]
    return []


def _shared_holds(facts: Facts) -> list[Held]:
    """What holds every session, or every session of its programme, that holds this one."""
    holds: list[Held] = []
    if not facts.scheduler_enabled:
        swept = "" if facts.sweep_at is None else f"; the sweep takes it at {_at(facts.sweep_at)}"
        holds.append(
            Held(
                HoldKind.SCHEDULER_OFF,
                facts.sweep_at,
                f"ENABLE_JOIN_LINK_SCHEDULER is off: no event, worker or watchdog takes it{swept}",
                facts.sweep_at is None,
            )
        )
    turn = facts.service
    # A WAIT names its hold; a call whose slot of the budget lies ahead waits for that slot.
    hold = turn.hold if turn.verdict is Verdict.WAIT else Hold.BUDGET if turn.wait_s > 0 else None
    if hold is not None:
        holds.append(Held(SERVICE_HOLDS[hold], turn.at, _service(facts, hold)))
    if facts.waits_now and facts.programmes_ahead:
        holds.append(
            Held(
                HoldKind.PROGRAMME_TURN,
                None,
                f"{facts.programmes_ahead} programme(s) with work waiting go first (the "
                "programme served least recently goes first)",
            )
        )
    if facts.scheduler_enabled and facts.live_workers == 0 and facts.claim_at is not None:
        event = "its event's run takes it; if that is lost, " if _event_due(facts) else ""
        holds.append(
            Held(
                HoldKind.NO_WORKER,
                _watchdog_at(facts),
                f"no worker is alive: {event}the watchdog launches one at its next tick after "
                f"{_at(_watchdog_at(facts))}",
            )
        )
    return holds


def _event_due(facts: Facts) -> bool:
    """A SCHEDULED session within the watchdog's grace: its real-time event is on its way."""
    return facts.session.status is S.SCHEDULED and (
        facts.claim_at is None
        or facts.now < facts.claim_at + timedelta(seconds=facts.watchdog_grace_s)
    )


def _service(facts: Facts, hold: Hold) -> str:
    """What the service's shared view holds every caller by (``jlg service show`` shows it)."""
    state, at = facts.service_state, _at(facts.service.at)
    if hold is Hold.PAUSE and state.paused_until is not None:
        return f"{hold.value} (its Retry-After) until {_at(state.paused_until)}"
    if hold is Hold.DOWN and state.down_since is not None:
        return f"{hold.value}: down since {_at(state.down_since)}, the next probe at {at}"
    if hold is Hold.BUDGET:
        return f"{hold.value} at {at} (JLG_ONLINE_SESSION_RATE)"
    return f"{hold.value}, until {at}"


def _watchdog_at(facts: Facts) -> datetime:
    """When the watchdog sees the session unattended: a SCHEDULED one its grace after its time
    (its event is on its way until then), any other once its claim time comes."""
    assert facts.claim_at is not None
    s = facts.session
    when = facts.claim_at
    if s.status is S.SCHEDULED:
        when += timedelta(seconds=facts.watchdog_grace_s)
    return max(when, facts.now) + timedelta(seconds=facts.watchdog_every_s)


def _next(facts: Facts, holds: list[Held]) -> tuple[datetime | None, str]:
    s = facts.session
    if _settled(s) or any(h.by_person and h.until is None for h in holds):
        person = next(h for h in holds if h.by_person)
        remedy = person.detail if person.kind is HoldKind.FAILED_FOR_GOOD else _remedy(person.kind)
        return None, f"nothing: {remedy}"
    swept = [h for h in holds if h.kind in SWEPT and h.until is not None]
    if swept:
        at = max(h.until for h in swept if h.until is not None)
        return at, f"the sweep at {_at(at)}"
    timed = [h.until for h in holds if h.until is not None and h.kind is not HoldKind.NO_WORKER]
    at = max([facts.now, *timed])
    if any(h.kind is HoldKind.NO_WORKER for h in holds):
        at = max(at, _watchdog_at(facts))
        event = "its event's run, or at the latest " if _event_due(facts) else ""
        return at, f"{event}a worker the watchdog launches, at {_at(at)}"
    if s.status is S.IN_PROGRESS and at == facts.now:
        return at, "the queue now: its claim went stale"
    when = "now" if at == facts.now else f"at {_at(at)}"
    if any(h.kind is HoldKind.PROGRAMME_TURN for h in holds):
        return at, f"the queue {when}, after the {facts.programmes_ahead} programme(s) ahead"
    return at, f"the queue {when}"


def _remedy(kind: HoldKind) -> str:
    return {
        HoldKind.DELETED: "it is never generated unless the host restores the program session",
        HoldKind.COMPLETED: "its link is generated; set a new time (PATCH) for another cycle",
        HoldKind.NOT_SCHEDULED: "a person must set its time (PATCH linkGenerationAt)",
        HoldKind.SET_ASIDE: "a person must set a new time (PATCH linkGenerationAt)",
        HoldKind.SCHEDULER_OFF: "a person must turn ENABLE_JOIN_LINK_SCHEDULER on (or launch "
        "join_link_fallback_sweep_job)",
    }.get(kind, "a person must act")


def _at(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


def one_line(why: Why) -> str:
    """The answer in one line (the watchdog's skip reason): the session, each hold and when it
    ends, and the next thing."""
    s = why.session
    holds = ", ".join(
        f"{h.kind.value}" + ("" if h.until is None else f" until {_at(h.until)}") for h in why.holds
    )
    return f"session {s.id} ({s.status.value}): held by {holds or 'nothing'}; next: {why.next}"


def why_lines(why: Why) -> list[str]:
    """The answer as an operator reads it (``jlg why``)."""
    s = why.session
    at = "-" if s.link_generation_at is None else "out of range"
    if why.readable and s.link_generation_at is not None:
        at = _at(s.link_generation_at)
    out = [
        f"session          {s.id}",
        f"status           {s.status.value} (attempt {s.attempt}), time {at}",
        f"database clock   {_at(why.now)}",
        "waits now        "
        + ("yes" if why.waits_now else "no")
        + ("" if why.waits_now or why.claim_at is None else f" (from {_at(why.claim_at)})"),
    ]
    last = why.ends_last
    for hold in why.holds:
        until = "until a person acts" if hold.until is None else f"until {_at(hold.until)}"
        if hold.kind is HoldKind.PROGRAMME_TURN:
            until = "until its turn"
        ends = " (ends last)" if len(why.holds) > 1 and hold is last else ""
        out.append(f"held by          {hold.kind.value}: {hold.detail}; {until}{ends}")
    if not why.holds:
        out.append("held by          nothing: a worker takes it next")
    out.append(f"next             {why.next}")
    for a in why.attempts:
        error = f", {a.error}" if a.error else ""
        run = a.run_id or "-"
        out.append(
            f"attempt {a.attempt:<8} {a.trigger}, run {run}, {a.outcome.value}{error}, "
            f"{a.lag.total_seconds():.0f} s after its time"
        )
    return out


def why_body(why: Why) -> dict[str, Any]:
    """The answer as JSON (the API's ``data``, ``jlg why --json``): times in UTC ending in Z,
    a time no read can show (out of range) null."""
    s = why.session
    return {
        "id": s.id,
        "linkGenerationStatus": s.status.value,
        "linkGenerationAt": _z(s.link_generation_at) if why.readable else None,
        "attempt": s.attempt,
        "now": _z(why.now),
        "waitsNow": why.waits_now,
        "claimableAt": _z(why.claim_at),
        "holds": [
            {
                "hold": h.kind.value,
                "until": _z(h.until),
                "byPerson": h.by_person,
                "endsLast": len(why.holds) > 1 and h is why.ends_last,
                "detail": h.detail,
            }
            for h in why.holds
        ],
        "next": why.next,
        "nextAt": _z(why.next_at),
        "attempts": [
            {
                "attempt": a.attempt,
                "trigger": a.trigger,
                "runId": a.run_id,
                "outcome": a.outcome.value,
                "error": a.error,
                "claimedAt": _z(a.claimed_at),
                "lagMs": round(a.lag.total_seconds() * 1000),
            }
            for a in why.attempts
        ],
    }


def _z(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
