"""A smoke of the chaos trial (``bench.trials.chaos``): the whole system as deployed, a short
seeded timeline of faults (the database, AWS and the online-session service each failing
once) and poison messages while admins arm sessions; every invariant holds at the end. The
five-minute seed runs with ``make trial``; the long trials (20 minutes) and why seeds moved
are in docs/performance.md."""

from pathlib import Path

import pytest

from bench.trials.chaos import Timeline, run

pytestmark = pytest.mark.timeout(300)

SEED = 338
"""Draws AWS throttling, a database failover, the service answering 429 and poison messages,
each over within a second or a few: no kill, so the smoke is not waiting on a daemon's
restart (the five-minute seed and the long trials draw those)."""
LENGTH_S = 45.0
SESSIONS = 4


def test_a_seeded_chaos_smoke_keeps_every_invariant(tmp_path: Path) -> None:
    timeline = Timeline.draw(SEED, LENGTH_S)
    kinds = {fault.kind.split()[0] for fault in timeline.faults}
    assert kinds == {"AWS", "postgres", "service"}, timeline.lines()
    outcome = run(timeline, SESSIONS, tmp_path)
    summary = "\n".join(
        [f"seed {SEED}", *timeline.lines(), *outcome.record.events, *outcome.violations]
    )
    assert outcome.figures["sessions armed"] >= SESSIONS // 2, summary
    assert outcome.violations == [], summary
