"""An experiment's typed plan and order, and the one run path for a value's run."""
