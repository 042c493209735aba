"""`nft -f FILE` done by this process through libnftables, the library the nft program itself is built
on (its Python binding: Debian's python3-nftables).

A host's setup puts its per-path byte counters in place with one `nft -f` batch; in a TCG guest that
process costs about 0.3 s to start (nft loads libnftables, libnftnl, libmnl, libjansson, libgmp and
libxtables first), and every host of a network pays it at once. Here the library is loaded once per
process, and each batch is parsed and applied in the calling thread's network namespace: the context,
and with it the netlink socket, is made by that thread (a host spawner's, runners.linux.nsspawn).
The result is the program's: the batch applied all or nothing, and the same messages, which name the
file's line (runners.linux.ipbatch reads them).

Calls are serialised: libnftables keeps some state per process (its symbol tables), and nothing says
that two contexts may parse at once in two threads.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_binding: type | None = None
_missing = False


def available() -> bool:
    """Whether libnftables' Python binding can be loaded here (else the nft program runs)."""
    return _load() is not None


def run_file(path: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `nft -f path`, run by this thread: 0 or 1, as the program's."""
    binding = _load()
    with _lock:
        nft = binding()
        try:
            rc, out, err = nft.cmd_from_file(path)
        finally:
            del nft   # its context, and the netlink socket, are freed here, in this thread, under the lock
    return (0 if rc == 0 else 1), out or "", err or ""


def _load() -> type | None:
    global _binding, _missing
    if _binding is None and not _missing:
        with _lock:
            if _binding is None and not _missing:
                try:
                    from nftables import Nftables   # Debian's python3-nftables, with libnftables1
                    Nftables()   # the library itself loads
                    _binding = Nftables
                except (ImportError, OSError):
                    _missing = True
    return _binding
