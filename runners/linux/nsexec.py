"""Run argument lists inside a Mininet host's namespace, and keep track of them.

Mininet's `node.cmd()` goes through a shared bash; we use `node.popen(list)`
instead, so no scenario value ever passes through a shell, and every
long-running process is registered for cleanup.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from runners.linux import ethtool, icmp_echo, ipbatch, ipchanges, mptcp_pm, nftlib
from runners.linux.commandlog import COMMANDS, Timed
from runners.linux.nsspawn import SpawnerGone
from runners.linux.processes import stop_processes

Argv = list[str]   # one command's argument list: never a shell string


class CommandError(RuntimeError):
    """A command the runner depends on failed: the run is aborted with its output."""


@dataclass
class Result:
    argv: list[str]
    rc: int
    out: str
    err: str


def run(node, argv: list[str], timeout: float = 60, check: bool = True) -> Result:
    """One command in the node's namespace, recorded in commands.log."""
    with Timed(node.name, argv) as t:
        try:
            res = _run(node, argv, timeout, check=False)
        except CommandError:
            t.rc = "timeout"
            raise
        t.rc = res.rc
    if check and res.rc != 0:
        raise CommandError(f"{node.name}: `{' '.join(argv)}` failed (exit {res.rc}): "
                           f"{(res.err or res.out).strip()[:500]}")
    return res


def _run(node, argv: list[str], timeout: float = 60, check: bool = True) -> Result:
    p = node.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise CommandError(f"{node.name}: `{' '.join(argv)}` timed out after {timeout:g}s") from None
    res = Result(argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
    if check and res.rc != 0:
        raise CommandError(f"{node.name}: `{' '.join(argv)}` failed (exit {res.rc}): "
                           f"{(res.err or res.out).strip()[:500]}")
    return res


# Runs several argument lists in one process: each process start costs ~0.1-0.2 s in a TCG guest,
# and a run reads counters with a dozen commands per host. Arguments arrive as positional
# parameters ("N word1..wordN N word1..."), and eval only ever sees "${1}" "${2}" ...: references,
# never the words themselves, so no argument passes through the shell's parser.
#
# `sysctl -q -w KEY=VALUE`, the form the testbed writes with, is a shell function here that writes
# /proc/sys with the printf builtin (one write at offset 0): a namespace's setup has a dozen of them,
# and each sysctl process cost another start. Reads stay with the real sysctl: the shell's `read`
# takes a byte at a time, and integer sysctls answer a read at a non-zero offset with end-of-file.
BATCH_SCRIPT = r"""proc_sys_path() {
  p=/proc/sys; r=$1
  while :; do case $r in *.*) p="$p/${r%%.*}"; r=${r#*.} ;; *) p="$p/$r"; return ;; esac; done
}
sysctl() {
  if [ $# -eq 3 ] && [ "$1" = -q ] && [ "$2" = -w ] && [ "${3#*=}" != "$3" ]; then
    proc_sys_path "${3%%=*}"; printf '%s\n' "${3#*=}" > "$p"
  else
    command sysctl "$@"
  fi
}
m=$1; shift; k=0
while [ $# -gt 0 ]; do
  n=$1; shift; c=; i=1
  while [ "$i" -le "$n" ]; do c="$c \"\${$i}\""; i=$((i+1)); done
  printf '%s %s\n' "$m" "$k" >&2
  eval "$c" </dev/null; rc=$?
  printf '\n%s %s rc=%s\n' "$m" "$k" "$rc"
  shift "$n"; k=$((k+1))
done"""


def batch_argv(argvs: list[list[str]], marker: str) -> list[str]:
    words = ["sh", "-c", BATCH_SCRIPT, "sh", marker]
    for argv in argvs:
        words += [str(len(argv)), *argv]
    return words


def split_batch(argvs: list[list[str]], marker: str, out: str, err: str) -> list[Result]:
    """The batch's stdout and stderr -> one Result per argument list (a missing one failed to run: rc -1)."""
    results = []
    rest = out
    err_parts = err.split(f"{marker} ")
    errs = {}
    for part in err_parts[1:]:
        num, _, text = part.partition("\n")
        errs[num.strip()] = text
    for k, argv in enumerate(argvs):
        tag = f"\n{marker} {k} rc="
        head, found, tail = rest.partition(tag)
        if not found:
            results.append(Result(argv, -1, head, errs.get(str(k), "") or "did not run"))
            rest = ""
            continue
        rc_text, _, rest = tail.partition("\n")
        results.append(Result(argv, int(rc_text), head, errs.get(str(k), "")))
    return results


def run_batch(node, argvs: list[list[str]], timeout: float = 60, check: bool = True) -> list[Result]:
    """Run several commands in a host's namespace, in order, with as few process starts as it takes;
    results in order. A run of `ip`, `tc` or `nft` changes is one process (it reads its commands from a
    file: ipbatch). Where this process can act in the node's namespace (a host's spawner thread, or a
    switch's namespace, which is this process's own), what _done_here knows (`sysctl -q -w`, `ethtool
    -K`, `ip` link, address and MPTCP endpoint changes, `ip mptcp endpoint show`, `nft -f`) is done here
    without a process, and each other unit starts on its own; elsewhere one shell runs them all. A run
    of nft changes is applied all or nothing: one failed command fails the run's others too, and with
    `check` the error raised names the command nft refused, not one it left unapplied."""
    if not argvs:
        return []
    for argv in argvs:
        COMMANDS.announce(node.name, argv)
    t0 = time.monotonic()
    parts = ipbatch.units(argvs)
    place = _place_of(node)
    with tempfile.TemporaryDirectory(prefix="testbed-batch-") if any(u.lines for u in parts) else \
            contextlib.nullcontext() as folder:
        argv_of = []
        for k, unit in enumerate(parts):
            path = None
            if unit.lines:
                path = os.path.join(folder, f"{k}.{unit.tool}")
                with open(path, "w") as f:
                    f.write("\n".join(unit.lines) + "\n")
            argv_of.append(unit.argv(path))
        if place is not None:
            done_all = [_run_unit_in_place(node, place, unit, argv, timeout) for unit, argv in zip(parts, argv_of)]
        elif len(argv_of) == 1 and argv_of[0][0] != "sysctl":
            done_all = [_run(node, argv_of[0], timeout=timeout, check=False)]   # no shell: one start less
        else:
            marker = "@@testbed-" + secrets.token_hex(8)
            res = _run(node, batch_argv(argv_of, marker), timeout=timeout, check=False)
            done_all = split_batch(argv_of, marker, res.out, res.err)
    results = []
    for unit, done in zip(parts, done_all):
        results += [Result(argv, *each) for argv, each in zip(unit.argvs, ipbatch.spread(unit, done.rc, done.out,
                                                                                          done.err))]
    share = (time.monotonic() - t0) / len(argvs)
    for r in results:
        COMMANDS.record(node.name, r.argv, r.rc, share)
    failed = [r for r in results if r.rc != 0]
    if check and failed:
        # the first cause: a command an all-or-nothing batch left unapplied only says which one failed
        r = min(failed, key=lambda r: r.err.startswith(ipbatch.NOT_APPLIED))
        raise CommandError(f"{node.name}: `{' '.join(r.argv)}` failed (exit {r.rc}): "
                           f"{(r.err or r.out).strip()[:500]}")
    return results


def _place_of(node) -> Callable | None:
    """How to run a function in the node's network namespace: by its host's spawner thread, or here for
    a Mininet switch (it stays in this process's namespace); None where neither can."""
    spawners = getattr(node, "spawners", None)
    if spawners is not None:
        return lambda fn: spawners.call(node, fn)
    switch = getattr(sys.modules.get("mininet.node"), "Switch", None)
    if switch is not None and isinstance(node, switch) and not node.inNamespace:
        return lambda fn: fn()
    return None


def _run_unit_in_place(node, place: Callable, unit: ipbatch.Unit, argv: list[str], timeout: float) -> Result:
    """One unit of a batch (`argv` runs it): done by this process in the node's namespace when it can be,
    else started."""
    fn = _done_here(unit, argv)
    if fn is not None:
        try:
            rc, out, err = place(fn)
            return Result(argv, rc, out, err)
        except (SpawnerGone, mptcp_pm.UseTheProgram):   # the process says what is wrong, in its words
            pass
        except Exception as e:   # the kernel's socket refused, say: this command's failure, with its words
            return Result(argv, 1, "", f"{argv[0]}: {e}\n")
    return _run(node, argv, timeout=timeout, check=False)


def _done_here(unit: ipbatch.Unit, argv: list[str]) -> Callable[[], tuple[int, str, str]] | None:
    """A function doing what the unit's `argv` does, returning (exit code, stdout, stderr), for the
    commands this process can carry out itself: `sysctl -q -w KEY=VALUE`, ethtool's feature changes,
    `ip` link, address and MPTCP endpoint changes (ipchanges, mptcp_pm), `ip mptcp endpoint show`, and
    `nft -f FILE` where libnftables' binding is installed."""
    if unit.tool == "ip":
        if argv == mptcp_pm.SHOW_ARGV:
            return lambda: mptcp_pm.show(ipchanges.ANSWER_S)
        if unit.lines:
            changes, batch_file = ipchanges.parse_lines(unit.options, unit.lines), argv[-1]
        else:
            key = ipbatch.batch_key(argv)
            changes = key and ipchanges.parse_lines(key[1], (" ".join(argv[1 + len(key[1]):]),))
            batch_file = None
        return (lambda: ipchanges.apply(changes, batch_file)) if changes else None
    if len(argv) == 4 and argv[:3] == ["sysctl", "-q", "-w"] and "=" in argv[3]:
        key, _, value = argv[3].partition("=")

        def write() -> tuple[int, str, str]:
            error, _ = _write_sysctls([(key, value)])
            return (1, "", f"sysctl: {error}\n") if error else (0, "", "")
        return write
    features = ethtool.parse_features(argv)
    if features is not None:
        def set_features() -> tuple[int, str, str]:
            rc, err = ethtool.set_features(*features)
            return rc, "", err
        return set_features
    if len(argv) == 3 and argv[:2] == ["nft", "-f"] and nftlib.available():
        return lambda: nftlib.run_file(argv[2])
    return None


# A namespace's sysctls are files of /proc/sys, which show the namespace of the thread that opens them: the
# thread of the host's spawner (runners.linux.nsspawn) reads and writes them without starting `sysctl`
# (0.1-0.2 s a process in a TCG guest). They are recorded in commands.log as the `sysctl` they stand for.
def proc_sys_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def read_sysctls(node, keys: list[str]) -> list[str]:
    """The values of `keys` in the node's namespace, as `sysctl -n` prints them (one line each)."""
    argv = ["sysctl", "-n", *keys]
    done = _in_namespace(node, lambda: _read_sysctls(keys))
    if done is None:
        return [" ".join(line.split()) for line in run(node, argv).out.splitlines()]
    (error, values), seconds = done
    COMMANDS.announce(node.name, argv)
    COMMANDS.record(node.name, argv, 1 if error else 0, seconds)
    if error:
        raise CommandError(f"{node.name}: `{' '.join(argv)}` failed: {error}")
    return values


def sysctl_write_argv(key: str, value: str) -> Argv:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def write_sysctls(node, pairs: list[tuple[str, str]]) -> None:
    """`sysctl -q -w key=value` for each pair in the node's namespace, in order; CommandError at the first
    the kernel refuses (the ones after it are not written)."""
    argvs = [sysctl_write_argv(k, v) for k, v in pairs]
    done = _in_namespace(node, lambda: _write_sysctls(pairs))
    if done is None:
        run_batch(node, argvs)
        return
    (error, written), seconds = done
    for n, argv in enumerate(argvs[:written + (1 if error else 0)]):   # the refused one last, with exit 1
        COMMANDS.announce(node.name, argv)
        COMMANDS.record(node.name, argv, 1 if n == written else 0, seconds / len(argvs))
    if error:
        raise CommandError(f"{node.name}: `{' '.join(argvs[written])}` failed: {error}")


def echo_from(node, requests: list[icmp_echo.EchoRequest]) -> list[icmp_echo.EchoOutcome] | None:
    """The pings `requests` stand for, all at once, sent and timed by this process from the node's
    namespaces (runners.linux.icmp_echo) and logged as those pings; None where no thread of this process
    is in them, or the kernel refused a socket (the ping process, started then, says why in its words)."""
    try:
        done = _in_namespace(node, lambda: icmp_echo.open_sockets(requests))
    except OSError:
        return None
    if done is None:
        return None
    for r in requests:
        COMMANDS.announce(node.name, r.argv)
    outcomes = icmp_echo.echo_all(list(zip(requests, done[0])))
    for r, outcome in zip(requests, outcomes):
        COMMANDS.record(node.name, r.argv, outcome.rc, outcome.elapsed_ms / 1000)
    return outcomes


def _in_namespace(node, fn) -> tuple[object, float] | None:
    """(fn(), seconds) run by the node's spawner thread; None where it has none (by process, then)."""
    spawners = getattr(node, "spawners", None)
    if spawners is None:
        return None
    t0 = time.monotonic()
    try:
        out = spawners.call(node, fn)
    except SpawnerGone:
        return None
    return out, time.monotonic() - t0


def _read_sysctl(key: str) -> str:
    with open(proc_sys_path(key)) as f:
        return " ".join(f.read().split())


def _read_sysctls(keys: list[str]) -> tuple[str | None, list[str]]:
    try:
        return None, [_read_sysctl(k) for k in keys]
    except OSError as e:
        return f"{e.strerror}: {e.filename or '/proc/sys'}", []


def _write_sysctls(pairs: list[tuple[str, str]]) -> tuple[str | None, int]:
    """(the first refusal or None, how many were written before it). Run in the host's namespace."""
    for n, (key, value) in enumerate(pairs):
        try:
            with open(proc_sys_path(key), "w") as f:   # one write at offset 0, as sysctl does
                f.write(f"{value}\n")
        except OSError as e:
            return f"{e.strerror}: {proc_sys_path(key)}", n
    return None, len(pairs)


class ProcessRegistry:
    """Background processes started for one purpose (a run's traffic and samplers; --capture's tcpdumps
    apart), so that every exit path can stop them."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def start(self, node, argv: list[str], stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.Popen:
        COMMANDS.announce(node.name, argv)
        p = node.popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        COMMANDS.record(node.name, argv, "background", 0.0)
        with self._lock:
            self._procs.append(p)
        return p

    def stop_all(self, grace: float = 2.0) -> None:
        with self._lock:
            procs, self._procs = self._procs, []
        stop_processes(procs, grace)


def at_once(fn: Callable, items) -> list:
    """fn on every item in threads of its own (one per namespace: each waits on its own process);
    results in order, and the first exception raised here."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(fn, items))
