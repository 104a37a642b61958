"""Samplers of the server's memory, GPUs and `/metrics` during a run."""
