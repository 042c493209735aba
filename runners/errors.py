"""The errors a run can end with (the CLI maps them to exit codes)."""


class RunFailure(RuntimeError):
    """Something broke while running; exit code 1 with this message."""


class Terminated(BaseException):
    """SIGTERM, turned into an exception so the `finally` cleanup runs."""
