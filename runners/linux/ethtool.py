"""`ethtool -K IFNAME FEATURE on|off ...` done by this process, over the SIOCETHTOOL ioctl.

Every shaped interface gets its segmentation offloads turned off, one `ethtool` process each. In a TCG
guest a process start costs about 0.1 s, and a switch's ports are done one after another: 33 of them
for bench.scale's 32 clients. Here the kernel's feature names are read once (ETHTOOL_GSTRINGS), the
names the ethtool program's words stand for are set in one ETHTOOL_SFEATURES, and the result is read
back (ETHTOOL_GFEATURES), as the program reports a change that did not take.

The socket is made by the calling thread, so the ioctl acts in that thread's network namespace: a host
spawner's thread (runners.linux.nsspawn) for a host's interfaces.
"""
from __future__ import annotations

import ctypes
import fcntl
import fnmatch
import socket
import struct
import threading

SIOCETHTOOL = 0x8946
IFNAMSIZ = 16
ETHTOOL_GSTRINGS, ETHTOOL_GSSET_INFO, ETHTOOL_GFEATURES, ETHTOOL_SFEATURES = 0x1b, 0x37, 0x3a, 0x3b
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32

# the ethtool program's names -> the kernel's feature names they stand for (off_flag_def in ethtool's
# common.c): `tso` is every TSO kind the running kernel has, newer ones (tx-tcp-accecn-segmentation)
# included, which the legacy one-feature commands (ETHTOOL_STSO) leave out
FEATURES = {
    "rx": "rx-checksum",
    "tx": "tx-checksum-*",
    "sg": "tx-scatter-gather*",
    "tso": "tx-tcp*-segmentation",
    "gso": "tx-generic-segmentation",
    "gro": "rx-gro",
}
STATES = {"on": 1, "off": 0}

_names: list[str] | None = None   # the kernel's feature names, the same for every device
_names_lock = threading.Lock()


class _IfReq(ctypes.Structure):
    # struct ifreq: the name, then a union whose member here is a pointer (40 bytes on 64-bit Linux)
    _fields_ = [("name", ctypes.c_char * IFNAMSIZ), ("data", ctypes.c_void_p), ("_rest", ctypes.c_char * 16)]


def parse_features(argv: list[str]) -> tuple[str, list[tuple[str, int]]] | None:
    """(interface, [(name, 0 or 1), ...]) for `ethtool -K IFNAME NAME on|off ...` with names this module
    knows; None for any other command (it runs as the ethtool program)."""
    if len(argv) < 5 or argv[:2] != ["ethtool", "-K"] or len(argv) % 2 == 0:
        return None
    ifname = argv[2]
    if not ifname or len(ifname.encode()) >= IFNAMSIZ or "/" in ifname or "\0" in ifname:
        return None
    pairs = list(zip(argv[3::2], argv[4::2]))
    if not all(f in FEATURES and s in STATES for f, s in pairs):
        return None
    return ifname, [(f, STATES[s]) for f, s in pairs]


def set_features(ifname: str, wanted: list[tuple[str, int]]) -> tuple[int, str]:
    """The named features set at once, then read back: (0, "") when every one is in the wanted state, else
    (1, the features that are not). Stricter than the ethtool program, which fails only when none took."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            names = _feature_names(sock, ifname)
            state: dict[int, int] = {}
            for short, on in wanted:
                bits = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, FEATURES[short])]
                if not bits:
                    return 1, f"Cannot change {short} of {ifname}: this kernel has no such feature\n"
                state.update((i, on) for i in bits)
            words = (len(names) + 31) // 32
            blocks = [[0, 0] for _ in range(words)]   # (valid, requested) per 32 features
            for i, on in state.items():
                blocks[i // 32][0] |= 1 << (i % 32)
                blocks[i // 32][1] |= on << (i % 32)
            _ioctl(sock, ifname, struct.pack(f"II{2 * words}I", ETHTOOL_SFEATURES, words,
                                             *(v for b in blocks for v in b)))
            got = _ioctl(sock, ifname, struct.pack(f"II{4 * words}I", ETHTOOL_GFEATURES, words, *[0] * 4 * words))
    except OSError as e:
        return 1, f"Cannot change features of {ifname}: {e.strerror}\n"
    fields = struct.unpack_from(f"{4 * words}I", got, 8)   # (available, requested, active, never) per block
    # any feature asked for and not in the wanted state, fixed ones too: a port left checksumming where
    # `tx off` was asked is a broken port of a userspace datapath, not a detail
    stuck = [names[i] for i, on in state.items() if (fields[4 * (i // 32) + 2] >> (i % 32) & 1) != on]
    if stuck:
        return 1, f"Could not change {', '.join(stuck)} of {ifname}\n"
    return 0, ""


def _feature_names(sock: socket.socket, ifname: str) -> list[str]:
    global _names
    with _names_lock:
        if _names is None:
            info = _ioctl(sock, ifname, struct.pack("IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES, 0))
            count = struct.unpack_from("I", info, 16)[0]
            raw = _ioctl(sock, ifname, struct.pack("III", ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
                         + bytes(count * ETH_GSTRING_LEN))
            _names = [raw[12 + k * ETH_GSTRING_LEN:12 + (k + 1) * ETH_GSTRING_LEN].split(b"\0")[0].decode()
                      for k in range(count)]
        return _names


def _ioctl(sock: socket.socket, ifname: str, command: bytes) -> bytes:
    """SIOCETHTOOL with `command` (a struct ethtool_* whose first word is the command); what the kernel
    wrote back into it."""
    buf = ctypes.create_string_buffer(command, len(command))
    req = _IfReq(ifname.encode(), ctypes.cast(buf, ctypes.c_void_p))
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, req)
    return buf.raw
