"""The testbed's runner: from a checked scenario to a result set, one room (package) per layer.

Top to bottom: cli -> backends -> runset -> pipeline -> collect -> traffic -> linux; results, analysis and
console beside them. Each room's __init__ says what it may import (tests/unit/test_layering.py checks it).
At the top only errors.py (every error type and exit code, importable by all) and paths.py."""
