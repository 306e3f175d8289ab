"""The order the suite's tests run in."""

from typing import TypeVar

T = TypeVar("T")


def spread(items: list[T], long: list[bool]) -> list[T]:
    """``items`` with those marked ``long`` at evenly spaced places (the first at the head),
    the rest in their order."""
    chosen = [item for item, is_long in zip(items, long, strict=True) if is_long]
    rest = iter([item for item, is_long in zip(items, long, strict=True) if not is_long])
    if not chosen:
        return list(rest)
    step = len(items) / len(chosen)
    places = {int(i * step): item for i, item in enumerate(chosen)}
    return [places[i] if i in places else next(rest) for i in range(len(items))]
