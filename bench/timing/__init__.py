"""Timing benchmarks: the measured path next to its baseline, ratios in one run."""
