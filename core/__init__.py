"""Row types, statuses, redaction and the clock: what every layer shares. Imports nothing of ours."""
