"""bulkRegister implementations behind the :class:`BulkRegistrar` protocol."""

from jlg_pipeline.adapters.registrars.protocol import BulkRegistrar

__all__ = ["BulkRegistrar"]
