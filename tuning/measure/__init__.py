"""One run's numbers: the load generator, telemetry, traffic, metrics, the run's health, the
workload."""
