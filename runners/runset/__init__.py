"""A run set: its frozen options, the checks before anything starts (plans, consent, user code), which jobs
in which order, the session (resume, rounds, how it ended) and the time estimate. May import pipeline and
the rooms below it, results and analysis."""
