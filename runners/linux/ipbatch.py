"""Consecutive `ip`, `tc` or `nft` changes in a command batch, run by one `ip -batch` (`tc -batch`,
`nft -f`) process.

Every process start costs 0.05-0.1 s in a TCG guest, and a dual-homed host's
setup alone is a dozen `ip` commands: addresses, routes, rules, links. iproute2
reads such a list from a file (`-batch FILE`), and with `-force` it runs every
line even after one fails, then names each failed line on stderr
(`Command failed FILE:N`) after that line's own message. One process then
stands in for the run of commands, and each command still gets its own
result: 0, or 1 with the message it printed (the batch does not give the
failed line's exit code).

Only changes are put in a batch: their output is nothing on success, so no
command's output has to be told apart from another's. A read (`show`, `list`,
`get`) runs on its own. A batch file's lines carry no options, so the commands
of one batch share their leading options (`-4`, `-6`); a command with an
option that takes a value (`-n NS`), or a word that iproute2's line parser
would treat specially (spaces, quotes, `#`, a backslash), also runs on its own.

`nft` joins its arguments with spaces and parses them as one line, so a file
of such lines (`nft -f FILE`) says the same; a word with a line break, which
would split the line, runs on its own. Unlike iproute2, nft applies a file
all or nothing: when a line fails, every command of the batch failed, and
stderr names the line (`FILE:N:COLUMNS: Error: ...`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TOOLS = ("ip", "tc")
FLAG_OPTIONS = frozenset({"-4", "-6"})           # global options without a value
CHANGES = frozenset({"add", "set", "flush", "del", "delete", "replace", "change", "append"})
READS = frozenset({"show", "list", "lst", "get", "monitor", "save", "restore", "help", "exec"})
PLAIN_WORD = re.compile(r"[A-Za-z0-9_.:/=,+@%-]+")
FAILED_LINE = re.compile(r"^Command failed .*:(\d+)\s*$")
NFT_CHANGES = frozenset({"add", "insert", "create", "delete", "destroy", "flush", "replace"})
NOT_APPLIED = "not applied:"   # how a command of a failed all-or-nothing batch says it was not the cause
NFT_FAILED_LINE = re.compile(r"^\S+?:(\d+):[\d-]+: Error: ", re.MULTILINE)


@dataclass(frozen=True)
class Unit:
    """One process of a batch: a command as it is, or a run of changes for one `-batch` file."""
    argvs: list[list[str]]          # the commands it stands for, in order
    options: tuple[str, ...] = ()   # the batch's leading options; lines empty: argvs[0] runs as it is
    lines: tuple[str, ...] = ()

    @property
    def tool(self) -> str:
        return self.argvs[0][0]

    def argv(self, batch_file: str | None = None) -> list[str]:
        """What runs: the command itself, or the tool reading the batch file."""
        if not self.lines:
            return self.argvs[0]
        if self.tool == "nft":
            return ["nft", "-f", str(batch_file)]
        return [self.tool, *self.options, "-force", "-batch", str(batch_file)]


def batch_key(argv: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """(tool, leading options) for an `ip`/`tc`/`nft` change that a batch file can carry; None if it cannot."""
    if argv[:1] == ["nft"]:
        fits = len(argv) >= 3 and argv[1] in NFT_CHANGES and not any("\n" in w or "\r" in w for w in argv)
        return ("nft", ()) if fits else None
    if len(argv) < 3 or argv[0] not in TOOLS:
        return None
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] not in FLAG_OPTIONS:
            return None
        i += 1
    words = argv[i:]
    if not words or words[0] == "netns" or not all(PLAIN_WORD.fullmatch(w) for w in words):
        return None
    head = set(words[:3])
    if head & READS or not head & CHANGES:
        return None
    return argv[0], tuple(argv[1:i])


def units(argvs: list[list[str]]) -> list[Unit]:
    """The commands, in order, as processes: each run of two or more batchable changes with the same
    tool and options becomes one unit."""
    out: list[Unit] = []
    run: list[list[str]] = []
    key = None

    def close() -> None:
        if len(run) >= 2:
            out.append(Unit([*run], key[1], tuple(" ".join(a[1 + len(key[1]):]) for a in run)))
        else:
            out.extend(Unit([a]) for a in run)
        run.clear()

    for argv in argvs:
        k = batch_key(argv)
        if k is None or k != key:
            close()
        key = k
        if k is None:
            out.append(Unit([argv]))
        else:
            run.append(argv)
    close()
    return out


def spread(unit: Unit, rc: int, out: str, err: str) -> list[tuple[int, str, str]]:
    """(rc, out, err) of each command of the unit, from its process's exit code and output."""
    if not unit.lines:
        return [(rc, out, err)]
    if unit.tool == "nft":
        return _spread_nft(len(unit.argvs), rc, out, err)
    failed: dict[int, str] = {}
    pending: list[str] = []
    for line in err.splitlines(keepends=True):
        m = FAILED_LINE.match(line)
        if m:
            failed[int(m.group(1))] = "".join(pending)
            pending = []
        else:
            pending.append(line)
    if rc != 0 and not failed:
        # the tool itself did not run (missing, killed, the file unreadable): so did none of its commands
        return [(rc, out if n == 0 else "", err) for n in range(len(unit.argvs))]
    results = [(1, "", failed[n]) if n in failed else (0, "", "") for n in range(1, len(unit.argvs) + 1)]
    first_rc, _, first_err = results[0]
    results[0] = (first_rc, out, first_err + "".join(pending))
    return results


def _spread_nft(count: int, rc: int, out: str, err: str) -> list[tuple[int, str, str]]:
    """nft applied all of the batch or none of it: on failure every command failed, and the one stderr
    names gets the message; the others say why they failed too."""
    if rc == 0:
        return [(0, out, err)] + [(0, "", "")] * (count - 1)
    named = {int(m.group(1)) for m in NFT_FAILED_LINE.finditer(err)}
    if not named:
        return [(rc, out, err)] * count
    first = min(named)
    why = f"{NOT_APPLIED} `nft -f` applies its batch all or nothing, and line {first} failed: {err.strip()}"
    return [(1, out if n == 1 else "", err if n in named else why) for n in range(1, count + 1)]
