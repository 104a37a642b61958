"""The lab's runs written in the field's formats: llm-d Benchmark Report v0.2.1, vLLM bench JSON."""
