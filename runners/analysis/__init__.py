"""Analysis of a saved result set: statistics, verdicts, JUnit, plots, the report and the summary line.
May import results, console and errors (and the scenario model).

Data only flows forward into here: these modules read results (dicts loaded
from results.json) and write files; they never import the code that builds
networks or runs traffic (tests/unit/test_layering.py holds that).
"""
