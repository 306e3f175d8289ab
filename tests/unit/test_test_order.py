"""The suite deals its long tests to the workers' shares of its order, each share's first
(tests/conftest.py): xdist hands each worker a contiguous share."""

from hypothesis import given
from hypothesis import strategies as st

from tests.support.order import spread


def _xdist_shares(count: int, workers: int) -> list[range]:
    """The contiguous shares xdist's worksteal scheduler sends its idle workers at the start."""
    shares, start = [], 0
    for i in range(workers):
        size = (count - start) // (workers - i)
        shares.append(range(start, start + size))
        start += size
    return shares


@given(st.lists(st.booleans()), st.integers(1, 4), st.integers(1, 4))
def test_each_share_starts_with_its_long_items_and_the_rest_keep_their_order(
    long: list[bool], workers: int, among: int
) -> None:
    items = list(range(len(long)))
    order = spread(items, long, workers, among)

    assert sorted(order) == items
    assert [i for i in order if not long[i]] == [i for i in items if not long[i]]
    chosen = [i for i in items if long[i]]
    if len(items) >= 2 * workers * len(chosen):  # a few long ones among many, as in the suite
        dealers = min(among, workers)
        for k, share in enumerate(_xdist_shares(len(items), workers)):
            dealt = chosen[k::dealers] if k < dealers else []
            first = [order[p] for p in share][: len(dealt) + 1]
            assert first[: len(dealt)] == dealt
            assert not any(long[i] for i in first[len(dealt) :]), "no long one but those dealt"
