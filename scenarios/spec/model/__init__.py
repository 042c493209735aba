"""The typed scenario model (format v1), one module per part; the names the testbed imports, in one place.

Every field that ends up in a command line is constrained here, because the
runner executes those commands as root. Unknown keys are errors so that a
typo never silently falls back to a default.
"""
from .scenario import *  # noqa: F401,F403 (the split into modules follows)
