"""Real traffic for tuning runs: a versioned workload spec, data file readers, length samplers,
arrival schedules, the materialized request list, its fingerprint and a preview. Engine-free."""

from tuning.measure.traffic.errors import DataError, TrafficError
from tuning.measure.traffic.fingerprint import fingerprint
from tuning.measure.traffic.materialize import Schedule, materialize
from tuning.measure.traffic.preview import preview
from tuning.measure.traffic.request import Message, PlannedRequest, render_messages, render_text
from tuning.measure.traffic.sources import read_source
from tuning.measure.traffic.spec import (
    SPEC_VERSION,
    Arrival,
    Bin,
    LengthDist,
    Limits,
    MultiTurn,
    SharedPrefixes,
    Source,
    WorkloadSpec,
)

__all__ = [
    "SPEC_VERSION",
    "Arrival",
    "Bin",
    "DataError",
    "LengthDist",
    "Limits",
    "Message",
    "MultiTurn",
    "Schedule",
    "PlannedRequest",
    "SharedPrefixes",
    "Source",
    "TrafficError",
    "WorkloadSpec",
    "fingerprint",
    "materialize",
    "preview",
    "read_source",
    "render_messages",
    "render_text",
]
