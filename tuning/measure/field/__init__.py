"""Result files of the field (vLLM bench, GuideLLM, AIPerf) read as lab runs."""
