"""Pure analysis: metrics, comparability, intervals and verdicts, the one comparison path."""
