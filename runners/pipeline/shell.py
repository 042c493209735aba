"""`run-scenario shell`: a scenario's network, built, shaped, verified and configured as a run would, then
Mininet's CLI with the testbed's own commands (paths, subflows, endpoints, counters, traffic).

The runner does the work (runners.pipeline.runner): the same build, shaping read-back, sysctls and
endpoints as a run, and `traffic` is one real run, stored in the shell's result set. Leaving the CLI
(exit, Ctrl-D) cleans up as a run does.
"""
from __future__ import annotations

from pathlib import Path

from runners.console.progress import describe_result
from runners.errors import RunFailure
from runners.linux import procfs, ss
from runners.linux.nsexec import CommandError, run_batch, run as run_in
from runners.pipeline.job import Job
from runners.results.store import ResultStore, new_run_dir

SHELL_HELP = """testbed commands (besides Mininet's: `h1 ping h2`, `h1 ip addr`, `xterm h1`, `help`):
  paths      each path: addresses, rate, delay, loss, queue, interfaces
  subflows   ss -tiMm on the client(s) and the server, grouped per MPTCP connection (cwnd, send buffers)
  endpoints  ip mptcp endpoint and limits on the client(s) and the server
  counters   MPTCP and out-of-order counters since the shell opened (nstat), per host
  traffic    the scenario's traffic once, as a run (stored in this shell's result set)
  path NAME down|up|blackhole|restore|backup|nobackup
             change a path now, as a scenario's event does (`link NAME ...` for a routed or switched link)
  shape NAME bw=2 delay=80ms loss=1 queue=50
             new shaping of a path (a link in routed and switched topologies), in place, read back
"""
COUNTER_PREFIXES = ("MPTcpExt", "TcpExtTCPOFO")


def open_session(out: str | Path, scenario_name: str, run_dir: str | Path | None = None) -> ResultStore:
    """The shell session's result set, natively and through the VM: `<out>/<scenario>/shell/<UTC time>`
    (in the VM's guest, the folder the host made), apart from the run sets. `traffic` stores its runs
    there, and they do not move `<out>/<scenario>/latest`: that stays with the newest set of real runs, which
    the handouts send students back to."""
    folder = Path(run_dir) if run_dir else new_run_dir(Path(out).resolve(), scenario_name, shell=True)
    return ResultStore(folder, links_latest=False)


def path_table(plan, scenario) -> str:
    rows = [("path", "family", "client", "server", "rate", "delay", "loss", "queue", "client if", "server if")]
    for p in plan.paths:
        s = p.shaping
        rows.append((p.name, p.family, p.client_ip, p.server_ip,
                     f"{s.rate_mbit:g} Mbit/s" if s else "-", f"{s.delay_ms:g} ms" if s else "-",
                     f"{s.loss_pct:g} %" if s else "-", f"{s.limit_pkts} pkts" if s else "-",
                     p.client_if, p.server_if))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def grouped_subflows(text: str) -> str:
    """ss's subflows of one host, one block per MPTCP connection (its local token)."""
    groups: dict[str, list[dict]] = {}
    for s in ss.parse_ss_subflows(text, windows=True):
        groups.setdefault(s.get("token", "?"), []).append(s)
    if not groups:
        return "  no MPTCP subflows"
    sockets = ss.parse_ss_mptcp_sockets(text)
    lines = []
    for token, subs in groups.items():
        lines.append(f"  connection token {token}: {len(subs)} subflow(s)" + _buffer(sockets.get(token, {}), "; "))
        for s in subs:
            lines.append(f"    {s['local']}:{s['local_port']} -> {s['remote']}:{s['remote_port']} ({s['family']})"
                         f"  sent {s.get('bytes_sent', 0)} B, received {s.get('bytes_received', 0)} B"
                         + (f", rtt {s['rtt_ms']:g} ms" if "rtt_ms" in s else "")
                         + (f", cwnd {s['cwnd']}" if "cwnd" in s else "") + _buffer(s, ", ")
                         + (" backup" if s.get("backup") else ""))
    return "\n".join(lines)


def _buffer(sock: dict, sep: str) -> str:
    if "sndbuf_bytes" not in sock:
        return ""
    return f"{sep}send buffer {sock['sndbuf_bytes']} B ({sock.get('sndbuf_used_bytes', 0)} B queued)"


def counter_lines(before: dict[str, int], after: dict[str, int]) -> list[str]:
    names = sorted({k for k in after if k.startswith(COUNTER_PREFIXES)})
    delta = procfs.counter_delta(before, after, names)
    changed = [(k, v) for k, v in delta.items() if v]
    return [f"  {k} {v}" for k, v in changed] or ["  no change"]


SHELL_ACTIONS = ("down", "up", "blackhole", "restore", "backup", "nobackup")


def parse_change(command: str, line: str, kind: str) -> dict:
    """A shell command as an event's fields: `path A down` -> {"path": "A", "do": "down"}; `shape A bw=2
    delay=80ms` -> {"path": "A", "shape": {"bw": "2", "delay": "80ms"}} (a link's in a routed or switched
    topology). ValueError says what is wrong; the event model checks the values."""
    words = line.split()
    if command in ("path", "link"):
        if len(words) != 2 or words[1] not in SHELL_ACTIONS:
            raise ValueError(f"usage: {command} NAME {'|'.join(SHELL_ACTIONS)}")
        return {command: words[0], "do": words[1]}
    if len(words) < 2 or any(w.count("=") != 1 for w in words[1:]):
        raise ValueError("usage: shape NAME bw=MBIT delay=MS loss=PERCENT queue=PACKETS (any of them)")
    shape = {k: _number(v) for k, v in (w.split("=", 1) for w in words[1:])}
    unknown = sorted(set(shape) - {"bw", "delay", "loss", "queue"})
    if unknown:
        raise ValueError(f"shape: unknown {', '.join(unknown)}; give bw, delay, loss or queue")
    return {"path" if kind == "dual-homed" else "link": words[0], "shape": shape}


def _number(text: str):
    """`2` is the number 2, as in a scenario file; `700kbit` or `80ms` stay words."""
    try:
        return float(text)
    except ValueError:
        return text


def apply_change(runner, primary: str, made: list[dict], fields: dict) -> str:
    """Check a shell change against the session's earlier ones, as a scenario's timeline is checked, and
    make it now; the summary line, or ValueError with the model's words."""
    from pydantic import ValidationError

    from scenarios.spec.model.events import Event, target_problem, timeline_problem
    from topologies.events import plan_changes

    from runners.pipeline.events import check_netem

    sc = runner.scenario
    try:
        event = Event.model_validate({"name": f"shell-{len(made) + 1}", "at": f"{len(made) + 1}ms", **fields})
    except ValidationError as e:
        raise ValueError("; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())) from None
    events = [Event.model_validate(f) for f in made] + [event]
    problem = target_problem(len(made), event, sc.topology, None) or timeline_problem(events, sc.mptcp.backup)
    if problem:   # the timeline's words without its field and time: "path B is already down"
        why = problem.split(": ", 1)[-1]
        raise ValueError(why.split(", but ", 1)[1].removesuffix(" then") if ", but " in why else why)
    change = plan_changes(sc.model_copy(update={"events": events}), runner.plan, primary)[-1]
    for nc in change.commands:
        run_batch(runner.network.get(nc.node), [list(a) for a in nc.argvs])
    nodes = {i.name: i.node for i in runner.plan.shaped_interfaces()}
    for dev, shaping in change.shaping.items():
        check_netem(runner.network.get(nodes[dev]), dev, shaping, f"shape {dev}")
    made.append({"name": event.name, "at": f"{len(made) + 1}ms", **fields})
    return f"{change.target[0]} {change.target[1]}: {change.detail}"


def make_cli(runner, point, primary: str):
    """Mininet's CLI class with the testbed's commands, bound to this runner and point."""
    from mininet.cli import CLI

    class TestbedCLI(CLI):
        prompt = "mininet> "

        def __init__(self, mininet, **kw):
            self.runner, self.point, self.primary, self.rep = runner, point, primary, 0
            self.made: list[dict] = []   # the session's changes, checked as a timeline
            self.hosts = [*runner.clients, runner.server]
            self.nstat_at_open = {h.name: procfs.parse_nstat(procfs.nstat_text(h.pid)) for h in self.hosts}
            super().__init__(mininet, **kw)

        def do_paths(self, _line):
            """Each path: addresses, rate, delay, loss, queue, interfaces."""
            self.stdout.write(path_table(self.runner.plan, self.runner.scenario) + "\n")

        def do_subflows(self, _line):
            """ss -tiMm on the client(s) and the server, grouped per MPTCP connection (cwnd, send buffers)."""
            from runners.linux.ss import ss_argv
            for h in self.hosts:
                self.stdout.write(f"{h.name}:\n{grouped_subflows(run_in(h, ss_argv(memory=True)).out)}\n")

        def do_endpoints(self, _line):
            """ip mptcp endpoint show and limits show on every host."""
            for h in self.hosts:
                eps = run_in(h, ["ip", "mptcp", "endpoint", "show"]).out.strip() or "(none)"
                limits = run_in(h, ["ip", "mptcp", "limits", "show"]).out.strip()
                self.stdout.write(f"{h.name}: limits {limits}\n  " + eps.replace("\n", "\n  ") + "\n")

        def do_counters(self, _line):
            """MPTCP and OFO counters (nstat) since the shell opened."""
            for h in self.hosts:
                now = procfs.parse_nstat(procfs.nstat_text(h.pid))
                self.stdout.write(f"{h.name}:\n" + "\n".join(counter_lines(self.nstat_at_open[h.name], now)) + "\n")

        def do_traffic(self, _line):
            """The scenario's traffic once, as a run: its summary line."""
            self.rep += 1
            mode = "mptcp" if "mptcp" in self.point.scenario.runs.compare else "tcp"
            result = self.runner.run_one(Job(self.point, self.rep, self.primary, mode))
            self.runner.store.flush_raw()   # its raw files are there to look at when the line is printed
            self.stdout.write(f"run {result['id']}: {describe_result(result)}\n")

        def _change(self, command: str, line: str) -> None:
            try:
                fields = parse_change(command, line, self.runner.plan.kind)
                self.stdout.write(apply_change(self.runner, self.primary, self.made, fields) + "\n")
            except (ValueError, CommandError, RunFailure) as e:
                self.stdout.write(f"*** {e}\n")

        def do_path(self, line):
            """path NAME down|up|blackhole|restore|backup|nobackup: change a path now."""
            self._change("path", line)

        def do_link(self, line):
            """link NAME down|up|blackhole|restore: change a link of a routed or switched topology now."""
            self._change("link", line)

        def do_shape(self, line):
            """shape NAME bw=2 delay=80ms loss=1 queue=50: new shaping, in place (tc qdisc change), read back."""
            self._change("shape", line)

        def do_testbed(self, _line):
            """The testbed's own commands."""
            self.stdout.write(SHELL_HELP)

    return TestbedCLI
