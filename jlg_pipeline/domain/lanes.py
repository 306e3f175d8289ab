"""The lanes runs queue in: each path of generation has its own slots (dagster.yaml's
tag_concurrency_limits), so a stuck path never holds another's. Every job tags its runs with
its lane; /metrics counts queued and running runs per lane."""

from enum import StrEnum

LANE_TAG = "jlg/lane"
"""Which path a run serves; dagster.yaml gives each lane its own run slots, so runs whose
process died (holding their slots until their bound) never block another path."""


class Lane(StrEnum):
    REALTIME = "realtime"
    """Generation runs of events, direct launches and hand launches (one session, or a
    burst's sessions sharing a run)."""
    RECOVERY = "recovery"
    """The watchdog's shared runs: never queued behind a stuck real-time run."""
    SWEEP = "sweep"
    SYNC = "sync"
    MAINTENANCE = "maintenance"
