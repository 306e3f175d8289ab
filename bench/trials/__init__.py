"""Reliability trials: failures injected and outcomes counted."""
