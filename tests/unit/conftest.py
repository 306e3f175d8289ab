"""The unit tier does no I/O but reading files: no socket, no process, no sleep. Each unit test
runs with those refused, so a test that needs one says so by living in tests/integration."""

import socket
import subprocess
import time
from typing import Any, NoReturn

import pytest


class UnitTierIO(AssertionError):
    """A unit test tried to open a socket, start a process or sleep."""


def _refuse(what: str) -> Any:
    def refused(*_: Any, **__: Any) -> NoReturn:
        raise UnitTierIO(f"a unit test may not {what}: move it to tests/integration")

    return refused


@pytest.fixture(autouse=True)
def no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _refuse("open a socket"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("open a socket"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("start a process"))
    monkeypatch.setattr(time, "sleep", _refuse("sleep"))
