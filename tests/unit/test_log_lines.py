"""One log line is one event, whatever a field from outside holds (docs/design.md "Trust
boundaries"): the audit forged a ``generation.completed`` line with an SQS body holding a
newline and an ESC."""

import logging
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jlg_pipeline.log import configure_logging, escaped, log_event
from jlg_pipeline.services.event_intake import drain
from tests.support.fakes import FakeQueue

FORGED = "not json\nINFO jlg_pipeline.services.generation generation.completed session_id=7\x1b[2K"


def test_a_queue_body_cannot_forge_a_line(caplog: pytest.LogCaptureFixture) -> None:
    queue = FakeQueue()
    queue.send(FORGED)
    with caplog.at_level(logging.INFO):
        drain(queue, runs_exist=lambda ids: set())
    (line,) = [r.getMessage() for r in caplog.records if "intake.dropped_invalid" in r.getMessage()]
    assert "\n" not in line
    assert "\x1b" not in line
    assert "json\\nINFO" in line


@given(st.text())
def test_any_field_stays_on_one_line(value: str) -> None:
    shown = escaped(value)
    for breaking in ("\n", "\r", "\x1b", "\x85", "\u2028", "\u2029", "\x00"):
        assert breaking not in shown


def test_log_event_escapes_every_field(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("jlg_pipeline.test")
    with caplog.at_level(logging.INFO, logger="jlg_pipeline.test"):
        log_event(logger, logging.INFO, "x.y", reason="a\nb\x1b[31m\u2028c\\d")
    assert caplog.records[-1].getMessage() == "x.y reason=a\\nb\\x1b[31m\\u2028c\\\\d"


def test_the_access_log_escapes_a_forwarded_address_and_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With --proxy-headers uvicorn logs X-Forwarded-For as sent, escapes included."""
    configure_logging()
    access = logging.getLogger("uvicorn.access")
    forged = '1.2.3.4\n127.0.0.1:1 - "GET /forged HTTP/1.1" 200\x1b[2K'
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        access.info('%s - "%s %s HTTP/%s" %d', forged, "GET", "/x\r\ny", "1.1", 200)
    line = caplog.records[-1].getMessage()
    assert "\n" not in line
    assert "\r" not in line
    assert "\x1b" not in line
    assert line.endswith(" 200")


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The controls that reorder what a reader's terminal shows (Trojan Source)."""
FIELD = re.compile(r' ([a-z_][a-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^ "]+)')
ESCAPE = re.compile(r"\\(\\|\"|n|r|t|x[0-9a-f]{2}|u[0-9a-f]{4})")


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _read_back(text: str) -> str:
    """A field's value as a reader of the line gets it back: unquoted, escapes undone."""
    if text.startswith('"'):
        text = text[1:-1]

    def undo(match: re.Match[str]) -> str:
        code = match.group(1)
        simple = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
        return simple.get(code) or chr(int(code[1:], 16))

    return ESCAPE.sub(undo, text)


def _parsed(line: str) -> dict[str, str]:
    event, _, rest = line.partition(" ")
    assert event == "x.y"
    fields = {}
    position = 0
    rest = " " + rest if rest else ""
    while position < len(rest):
        match = FIELD.match(rest, position)
        assert match is not None, f"not a field at {position}: {rest[position:]!r}"
        fields[match.group(1)] = _read_back(match.group(2))
        position = match.end()
    return fields


@given(
    st.dictionaries(
        st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(lambda k: k != "exc_info"),
        st.text() | st.sampled_from(["x message_id=forged", "", '"', "a=b", BIDI, "\\"]),
        max_size=4,
    )
)
def test_every_line_parses_back_into_exactly_the_fields_written(fields: dict[str, str]) -> None:
    """A value from outside can never look like another field: one that holds a space, a quote
    or nothing is quoted, and a bidi control is escaped like every unprintable character."""
    logger = logging.getLogger("jlg_pipeline.test.fields")
    handler = Kept()
    records = handler.records
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        written: dict[str, Any] = dict(fields)
        log_event(logger, logging.INFO, "x.y", **written)
    finally:
        logger.removeHandler(handler)
    line = records[-1].getMessage()
    assert not any(c in line for c in BIDI)
    assert _parsed(line) == fields
