"""The command line: the outermost layer of the lab; nothing imports it but `tuning/__main__.py`."""
