"""The online-session service's ``Retry-After``, an upstream answer: ASCII delta-seconds or an
HTTP date are taken, anything else is ignored, and nothing it sends can raise."""

import httpx
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.adapters.registrars.http import retry_after


@given(st.text(alphabet=st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=60))
def test_any_value_is_a_wait_or_nothing_and_never_an_error(raw: str) -> None:
    waited = retry_after(httpx.Headers({b"Retry-After": raw.encode("latin-1")}))
    assert waited is None or 0 <= waited < float("inf")
    stripped = raw.strip(" \t")
    if stripped.isascii() and stripped.isdigit():
        assert waited == min(float(int(stripped)), 1e15)
    elif any(c.isdigit() and not c.isascii() for c in stripped) and not any(
        c.isalpha() for c in stripped
    ):
        assert waited is None, "digits that are not ASCII are not delta-seconds"


@given(st.integers(min_value=0, max_value=10**20))
def test_delta_seconds_are_taken_as_written(seconds: int) -> None:
    assert retry_after(httpx.Headers({"Retry-After": str(seconds)})) == min(float(seconds), 1e15)
