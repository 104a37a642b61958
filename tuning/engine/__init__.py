"""Which vLLM, its flags and params, the argv of a start, the server process, its startup log and
anatomy, what it really applied, the KV prediction."""
