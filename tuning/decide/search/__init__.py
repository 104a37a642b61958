"""Search one parameter over a range, and tuning plans of several searches."""
