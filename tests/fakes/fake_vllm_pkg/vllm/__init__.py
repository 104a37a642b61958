"""A fake `vllm` package for the fast tier: only what tuning/engine/flags/engine_probe.py imports
(the
parser), with a few flags of each kind vLLM has. The real parser is read in tests/engine."""

__version__ = "0.32.0+fake"
