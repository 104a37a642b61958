"""Altair charts of stored runs: kinds, builders, comparisons, time series."""
