"""The errors a run can end with (the CLI maps them to exit codes)."""
import errno


class RunFailure(RuntimeError):
    """Something broke while running; exit code 1 with this message."""


class Terminated(BaseException):
    """SIGTERM, turned into an exception so the `finally` cleanup runs."""


# the disk under the results cannot take more: full, over quota, or remounted read-only
RESULTS_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def results_disk_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in RESULTS_DISK_ERRNOS
