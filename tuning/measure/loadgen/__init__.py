"""The load generator: the streaming client, its transports, the schedule."""
