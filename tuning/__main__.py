"""`python -m tuning ...`: the lab's CLI (see tuning/cli/)."""

import sys

from tuning.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
