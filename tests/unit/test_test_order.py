"""The suite spreads its long tests through its order (tests/conftest.py), so xdist's
contiguous shares each get some of them."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from tests.support.order import spread


@given(st.lists(st.booleans()))
def test_long_items_are_spread_evenly_and_the_rest_keep_their_order(long: list[bool]) -> None:
    items = list(range(len(long)))
    order = spread(items, long)

    assert sorted(order) == items
    assert [i for i in order if not long[i]] == [i for i in items if not long[i]]
    assert [i for i in order if long[i]] == [i for i in items if long[i]]
    places = [p for p, i in enumerate(order) if long[i]]
    if places:
        assert places[0] == 0
        gap = len(items) // len(places)  # so each contiguous share of the order gets its part
        assert all(b - a >= gap for a, b in itertools.pairwise(places))
