"""What run-scenario shows: info and error lines, -q, the progress display and run.log. Importable by
every room; imports only errors and results.derived (a run record's counts, as text)."""
