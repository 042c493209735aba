"""`python -m runners.cli`: the same as the `run-scenario` command."""
import sys

from runners.cli import main

if __name__ == "__main__":   # not when a walk over the package imports every module
    sys.exit(main())
