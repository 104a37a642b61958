"""Test doubles (fake NVML, ...); they live in tests/ only."""
