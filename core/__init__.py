"""Row types, statuses, redaction and the clock: what every layer shares; imports nothing of
ours."""
