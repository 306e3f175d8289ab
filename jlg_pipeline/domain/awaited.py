"""Which due sessions a generation run is about to claim, so the watchdog leaves them to it.

The watchdog's grace (75 s) is what a lost event costs; a cohort larger than its runs can serve
in that time (a rate budget of 25 a second drains 2,000 sessions in 80 s) still sits in runs
queued behind the running ones when the grace passes. Taking those for lost launched a second
run for each of them, found them claimed, and spent a run's start (seconds of CPU) for
nothing, while the cohort was draining. A session is awaited while a run that lists it:

- is running and **alive**: it wrote to its event log within ``silent_for_s`` (a run writes
  for every session it dispatches and completes; a live one is silent at most for one call at
  its bound); a run whose process died writes nothing and is taken for dead that long after;
- or is queued (or starting) in a lane where such a live run moves: a lane held only by dead
  runs starts nothing until their bound, so its queue waits for nobody.
"""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunSeen:
    """A generation run not yet finished, as the orchestrator records it."""

    lane: str | None
    last_heard_at: float | None
    """A running run's newest event (or its start), Unix seconds; None: queued or starting."""
    sessions: frozenset[int]

    @property
    def running(self) -> bool:
        return self.last_heard_at is not None

    def alive(self, now: float, silent_for_s: float) -> bool:
        return self.last_heard_at is not None and now - self.last_heard_at < silent_for_s


def awaited(runs: Iterable[RunSeen], now: float, silent_for_s: float) -> frozenset[int]:
    """The sessions some run will claim soon (see the module's rule)."""
    seen = list(runs)
    alive = [r for r in seen if r.alive(now, silent_for_s)]
    moving = {r.lane for r in alive}
    waiting = [r for r in seen if not r.running and r.lane in moving]
    return frozenset(sid for r in (*alive, *waiting) for sid in r.sessions)
