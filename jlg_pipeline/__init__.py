"""Scheduled join-link generation for program sessions.

Layers, imports pointing one way: ``domain`` <- ``adapters`` <- ``services`` <- entry points
(``cli``, ``definitions`` for Dagster, the ``web`` package for HTTP).
"""
