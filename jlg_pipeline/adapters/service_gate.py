"""All SQL on ``jlg_service_gate``: a pause an external service asked for, kept in the
database so every run and every process sees it (no process-local circuit breaker would be
seen by the others). Times are the database's."""

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Engine, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from jlg_pipeline.adapters.database import translate_errors
from jlg_pipeline.adapters.tables import service_gate as gate
from jlg_pipeline.domain.retries import GateState, GateVerdict


def _seconds(value: float) -> ColumnElement[Any]:
    return func.make_interval(0, 0, 0, 0, 0, 0, value)


class ServiceGate:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def check(self, name: str, probe_s: float) -> GateVerdict:
        """OPEN when no pause holds; CLOSED (until when) while one does; PROBE for the one
        caller that finds a pause just over, which holds the gate ``probe_s`` for its try
        (the others see CLOSED until it reopens or pauses it again). The row is locked while
        it is decided, so of callers arriving together exactly one probes."""
        locked = (
            select(gate.c.paused_until, gate.c.paused_until > func.now())
            .where(gate.c.name == name)
            .with_for_update()
        )
        with translate_errors("checking the service's pause"), self._engine.begin() as conn:
            row = conn.execute(locked).first()
            if row is None:
                return GateVerdict(GateState.OPEN)
            until, paused = row
            if paused:
                return GateVerdict(GateState.CLOSED, until)
            probe_until = conn.execute(
                update(gate)
                .where(gate.c.name == name)
                .values(paused_until=func.now() + _seconds(probe_s))
                .returning(gate.c.paused_until)
            ).scalar_one()
        return GateVerdict(GateState.PROBE, probe_until)

    def paused_until(self, name: str) -> datetime | None:
        """When the pause now holding ends, or None (a look only: no probe is taken)."""
        statement = select(gate.c.paused_until).where(
            gate.c.name == name, gate.c.paused_until > func.now()
        )
        with translate_errors("reading the service's pause"), self._engine.connect() as conn:
            return conn.execute(statement).scalar_one_or_none()

    def release_probe(self, name: str) -> None:
        """A probe taken but not used (the session was not claimable): the next caller
        probes at once instead of waiting out the hold."""
        statement = update(gate).where(gate.c.name == name).values(paused_until=func.now())
        with translate_errors("releasing a service probe"), self._engine.begin() as conn:
            conn.execute(statement)

    def pause(self, name: str, seconds: float, reason: str) -> None:
        """Hold every caller off for ``seconds`` from now (a later pause already set wins)."""
        until = func.now() + _seconds(seconds)
        statement = (
            insert(gate)
            .values(name=name, paused_until=until, reason=reason[:200])
            .on_conflict_do_update(
                index_elements=[gate.c.name],
                set_={
                    "paused_until": func.greatest(gate.c.paused_until, until),
                    "reason": reason[:200],
                },
            )
        )
        with translate_errors("pausing calls to a service"), self._engine.begin() as conn:
            conn.execute(statement)

    def reopen(self, name: str) -> None:
        """The service answered: no pause (a later 429 pauses it again)."""
        with translate_errors("reopening a service's gate"), self._engine.begin() as conn:
            conn.execute(delete(gate).where(gate.c.name == name))
