"""`--objective METRIC` and `--guard METRIC` (repeatable) of `experiment`: the metrics that decide
it (tuning.compare.primaries), read into one object the CLI, the UI and the tests build alike."""

from __future__ import annotations

import argparse

from tuning.compare.primaries import DEFAULT_GUARDS, DEFAULT_OBJECTIVE, Primaries


def add_primary_arguments(p: argparse.ArgumentParser) -> None:
    """Add --objective and --guard to a parser."""
    p.add_argument(
        "--objective",
        default=None,
        metavar="METRIC",
        help=f"the metric the experiment tries to improve (default {DEFAULT_OBJECTIVE}); only "
        "it and the guards decide, with the family-wise false-alarm rate held across them",
    )
    p.add_argument(
        "--guard",
        action="append",
        default=None,
        metavar="METRIC",
        help=f"a metric that must not get worse (repeatable or comma-separated; default "
        f"{', '.join(DEFAULT_GUARDS)}; 'none' for no guard); every other metric is shown for "
        "information, not corrected",
    )


def primaries_from_args(args: argparse.Namespace) -> Primaries:
    """The primaries the arguments declare; ValueError names the flag and the metric."""
    return Primaries.parse(getattr(args, "objective", None), getattr(args, "guard", None))


def primaries_given(args: argparse.Namespace) -> bool:
    return getattr(args, "objective", None) is not None or getattr(args, "guard", None) is not None
