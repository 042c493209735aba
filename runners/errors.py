"""The errors a run can end with, and every exit code run-scenario returns (the CLI maps the one to the
other; its --help lists the codes)."""
import errno

EXIT_OK = 0
EXIT_FAIL = 1              # a failure while running (finished runs are kept), or a failed verdict
EXIT_INPUT = 2             # bad input or a bad command line: nothing was started
# the guest's code when its kernel cannot run the scenario (its probe refused): the host goes on with the
# other kernels of the sweep
EXIT_KERNEL_REFUSED = 3
EXIT_INTERRUPTED = 130     # Ctrl-C: 128 + SIGINT, as a shell reports a process the signal ended
EXIT_TERMINATED = 143      # SIGTERM, or SIGHUP (a closed terminal): 128 + SIGTERM
EXIT_OUTPUT_LOST = 120     # the output could not all be written at the exit (a full disk): as Python's own exit
# stopped by the user, not failed: the set is kept as it is, to resume
EXIT_STOPPED = (EXIT_INTERRUPTED, EXIT_TERMINATED)


class RunFailure(RuntimeError):
    """Something broke while running; exit code 1 with this message."""


class Terminated(BaseException):
    """SIGTERM, turned into an exception so the `finally` cleanup runs."""


# the disk under the results cannot take more: full, over quota, or remounted read-only
RESULTS_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def results_disk_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in RESULTS_DISK_ERRNOS


class ParseError(ValueError):
    """A tool printed something we cannot interpret: a run failure, not bad input."""


class ControlPlaneError(RuntimeError):
    """The controller or OVS could not be started or died: a run failure with a clear message."""
