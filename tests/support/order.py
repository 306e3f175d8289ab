"""The order the suite's tests run in."""

from typing import TypeVar

T = TypeVar("T")


def spread(items: list[T], long: list[bool], shares: int, among: int) -> list[T]:
    """``items`` as ``shares`` contiguous shares (as xdist hands them to its workers), those
    marked ``long`` dealt round-robin to the first ``among`` shares and put
    first in each: those workers start on their long ones, the others on the rest, and what
    is left at the end is short enough to balance. Otherwise in their order."""
    among = min(among, shares)
    chosen = [item for item, is_long in zip(items, long, strict=True) if is_long]
    rest = iter([item for item, is_long in zip(items, long, strict=True) if not is_long])
    order: list[T] = []
    for k in range(shares):
        order += chosen[k::among] if k < among else []
        end = len(items) * (k + 1) // shares
        order += [item for _, item in zip(range(end - len(order)), rest, strict=False)]
    return order + list(rest)
