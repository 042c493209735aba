"""Reading a file the user names (a scenario, a trace): a regular file under a size cap, nothing else.

Opened without blocking, so a FIFO cannot hang the reader; a device (a link to /dev/zero) or a socket is
refused before a byte is read, and a file that grows while it is read is refused too.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


class FileProblem(Exception):
    """The file exists but is not one to read: not a regular file, or over the cap. The message says why,
    without the file's name (the caller names it)."""


def read_regular(p: Path, cap: int, what: str) -> bytes:
    """The bytes of regular file `p`, at most `cap` of them; `what` names the kind in messages ('a scenario
    file'). FileNotFoundError, IsADirectoryError and other OSErrors go to the caller."""
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(p)
        if not stat.S_ISREG(st.st_mode):
            raise FileProblem(f"is not a regular file (a pipe, device or socket); give {what}")
        if st.st_size > cap:
            raise FileProblem(f"is {st.st_size} bytes; {what} may be at most {cap}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise FileProblem(f"grew past {cap} bytes while being read")
    return data
