"""``jlg service show`` and ``jlg service resume``: an operator sees the online-session
service's shared view and clears what a bad answer set (docs/design.md "Trust boundaries", "No
single answer"; docs/operations.md "The online-session service's pause and breaker")."""

import logging
from collections.abc import Sequence
from datetime import datetime

from jlg_pipeline.adapters.metrics_snapshot import MetricsSnapshot
from jlg_pipeline.adapters.service_view import Resume, ServiceView
from jlg_pipeline.domain.service_view import ViewState
from jlg_pipeline.log import log_event

logger = logging.getLogger(__name__)


RESUMES_SHOWN = 5


def shown(snapshot: MetricsSnapshot, resumes: Sequence[Resume] = ()) -> list[str]:
    """The shared view as lines an operator reads: pause, breaker, budget, backlog, and the
    last resumes, newest first."""
    assert snapshot.service is not None
    look = snapshot.service
    state, budget, now = look.state, look.budget, look.now
    lines = [f"database clock   {_at(now)}"]
    if state.paused(now):
        lines.append(f"pause            until {_at(state.paused_until)} (Retry-After)")
    elif state.paused_until is not None:
        lines.append(f"pause            ended {_at(state.paused_until)}; one probe asks first")
    else:
        lines.append("pause            none")
    if state.down:
        lines.append(
            f"breaker          OPEN since {_at(state.down_since)}: one probe every few seconds"
        )
    else:
        lines.append(f"breaker          closed ({state.failures} unwell answer(s) in a row)")
    if budget.rate is None:
        lines.append("budget           none (JLG_ONLINE_SESSION_RATE unset)")
    else:
        tokens = state.tokens(budget, now) or 0.0
        lines.append(
            f"budget           {budget.rate:g} calls/s, burst {budget.burst:g}, "
            f"{tokens:.1f} call(s) free now"
        )
    lines.append(f"longest pause    {budget.max_pause_s:g} s (JLG_ONLINE_SESSION_MAX_PAUSE_S)")
    backlog_s = snapshot.service_backlog_seconds
    lines.append(
        f"backlog          {snapshot.service_backlog} due session(s)"
        + ("" if backlog_s is None else f", {backlog_s:.0f} s at the budget")
    )
    if state.resumed_at is not None:
        lines.append(f"last resumed     {_at(state.resumed_at)} by {state.resumed_by}")
    for r in resumes:
        was = "paused" if r.paused_until is not None else "clear"
        breaker = "open" if r.down_since is not None else "closed"
        lines.append(f"resumed          {_at(r.at)} by {r.by} (it was {was}, breaker {breaker})")
    return lines


def resume(view: ServiceView, by: str) -> tuple[ViewState, ViewState]:
    """Clear a pause or an open breaker (every session the breaker held is due at once), on
    record in the row (``/metrics``' ``jlg_online_session_resumed_timestamp_seconds``) and the
    log; the view before and after."""
    before, after = view.resume(by)
    log_event(
        logger,
        logging.WARNING,
        "service.resumed",
        by=by,
        at=after.resumed_at,
        paused_until=before.paused_until,
        down_since=before.down_since,
        failures=before.failures,
    )
    return before, after


def _at(when: datetime | None) -> str:
    return "-" if when is None else when.isoformat(timespec="seconds")
