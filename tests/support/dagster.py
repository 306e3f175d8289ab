"""Dagster test support: a registrar resource backed by the recording fake."""

import uuid

from jlg_pipeline.adapters.registrars import BulkRegistrar
from jlg_pipeline.orchestration.resources import DatabaseResource, RegistrarResource
from tests.support.fakes import RecordingRegistrar

_FAKES: dict[str, BulkRegistrar] = {}


class FakeRegistrarResource(RegistrarResource):
    """Dagster may rebuild a resource from its config, so the fake is found by key."""

    key: str

    def registrar(self, database: DatabaseResource) -> BulkRegistrar:
        return _FAKES[self.key]


def fake_registrar(fake: RecordingRegistrar | BulkRegistrar) -> FakeRegistrarResource:
    key = uuid.uuid4().hex
    _FAKES[key] = fake
    return FakeRegistrarResource(key=key)
