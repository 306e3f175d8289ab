"""When generation runs are shared (docs/design.md "Bursts"). A run's start costs about
2.5 CPU-seconds (a fresh interpreter importing Dagster), a shared run's session about
0.04: while few units of work (SQS messages, direct launches) wait, each gets its own run,
the design card's shape; once more wait than single runs can start in time, they share runs
of up to ``max_sessions_per_run``. The sensors that ask for runs decide per tick."""

from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_MAX_SESSIONS_PER_RUN = 100
MAX_SESSIONS_PER_RUN = 1000
"""A run's config lists its sessions; past a thousand it is a burden to read in the UI."""
DEFAULT_SHARE_ABOVE = 10
"""Ten single runs cost about 25 CPU-seconds to start: on two cores the tenth claims within
a quarter of a minute, well inside the two minutes a session has. Five hundred do not."""


@dataclass(frozen=True, slots=True)
class RunSharing:
    max_sessions_per_run: int = DEFAULT_MAX_SESSIONS_PER_RUN
    """The cap on a shared run; 1 gives every unit its own run, whatever waits."""
    share_above: int = DEFAULT_SHARE_ABOVE
    """Units waiting for a run (a tick's new ones plus the runs not yet started) up to which
    each gets its own run; 0 shares always."""

    def sessions_per_run(self, new: int, not_started: Callable[[], int]) -> int:
        """1 for a run a unit, else the cap. ``not_started`` (runs queued or starting) is
        asked only when the tick's own units leave the choice open."""
        if self.max_sessions_per_run == 1:
            return 1
        if new > self.share_above:
            return self.max_sessions_per_run
        return 1 if new + not_started() <= self.share_above else self.max_sessions_per_run


DEFAULT_SHARING = RunSharing()
ONE_RUN_EACH = RunSharing(max_sessions_per_run=1)
