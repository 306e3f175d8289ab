"""How often a sensor ticks. Dagster's sensor daemon looks every 5 s and evaluates a sensor whose
last tick began at least its ``minimum_interval_seconds`` before; a tick begins a moment after
the look, so a sensor asking for a multiple of the loop was just under it at every other look
(a 5 s sensor ticked 5 or 10 s apart, its worker or run launched 5 s late). Each sensor asks
for a second less than the spacing it means."""

LOOK_MARGIN_S = 1
"""More than a tick ever starts after the daemon's look, less than the daemon's 5 s loop."""


def minimum_interval(every_s: int) -> int:
    """The ``minimum_interval_seconds`` of a sensor meant to tick every ``every_s`` seconds."""
    return max(every_s - LOOK_MARGIN_S, 1)
