"""One backoff (domain/backoff.py): every wait that doubles per try is computed there, and
nowhere else in the shipped code."""

import math
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.domain.backoff import MAX_DOUBLINGS, backoff_s
from jlg_pipeline.services.retrying import tries

ROOT = Path(__file__).resolve().parents[2]
DOUBLING = re.compile(r"\b2(?:\.0)?\s*\*\*\s*[a-zA-Z_(]|[\w)]\s*\*\s*2\b(?![\d.])")


def test_no_other_module_doubles_a_wait() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("jlg_pipeline", "web")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "jlg_pipeline" / "domain" / "backoff.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DOUBLING.search(line)
    ]
    assert found == []


@given(
    first_s=st.floats(0.01, 60),
    tries=st.integers(-5, 10_000),
    cap_s=st.floats(0.01, 3600) | st.just(math.inf),
)
def test_the_wait_doubles_from_the_first_up_to_the_cap(
    first_s: float, tries: int, cap_s: float
) -> None:
    wait = backoff_s(first_s, tries, cap_s)
    assert 0 < wait <= cap_s
    if tries <= 0:
        assert wait == min(first_s, cap_s)
    elif tries < MAX_DOUBLINGS:
        assert backoff_s(first_s, tries + 1, cap_s) == min(wait * 2, cap_s)


@given(first_s=st.floats(0.01, 10), at_most=st.integers(1, 8))
def test_tries_sleep_the_backoff_between_tries_and_stop_after_the_last(
    first_s: float, at_most: int
) -> None:
    waits: list[float] = []
    numbers = list(tries(first_s, 5.0, at_most=at_most, sleep=waits.append))
    assert numbers == list(range(at_most))
    assert waits == [backoff_s(first_s, n, 5.0) for n in range(at_most - 1)], "none after the last"


def test_tries_within_a_bound_stop_when_it_has_passed() -> None:
    waits: list[float] = []
    assert list(tries(1.0, within_s=0.0, sleep=waits.append)) == [0]
    assert waits == [], "no sleep past the bound"
