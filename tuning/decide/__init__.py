"""Decisions over many runs: searches, multi-flag plans, the fleet, findings, liveness (reaper and
holder)."""
