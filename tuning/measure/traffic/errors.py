"""The two ways a workload goes wrong: a spec the lab refuses, and a data file it cannot read."""

from __future__ import annotations

from pathlib import Path


class TrafficError(ValueError):
    """A workload spec, or a request list, the lab refuses; the message says which rule."""


class DataError(TrafficError):
    """A data file the lab cannot use; says the file, the line (1-based) and the field when known.

    Readers raise it before returning anything, so a bad file never leaves a half-built request
    list behind.
    """

    def __init__(
        self, path: str | Path, message: str, line: int | None = None, field: str | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path if line is None else f"{self.path}, line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
