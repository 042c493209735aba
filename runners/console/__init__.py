"""What run-scenario shows: info and error lines, -q, the progress display and run.log. Importable by
every room but linux; imports only errors, linux (its batched appender) and results.derived (a run record's counts,
as text)."""
