"""Wall-clock timestamps as the store keeps them: UTC ISO 8601, one format everywhere."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso(timespec: str = "milliseconds") -> str:
    return datetime.now(UTC).isoformat(timespec=timespec)


def age_s(stamp: str | None, now: float | None = None) -> float:
    """Seconds since an ISO stamp; infinity when it is missing or unreadable."""
    if not stamp:
        return float("inf")
    try:
        then = datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return float("inf")
    return (now if now is not None else datetime.now(UTC).timestamp()) - then
