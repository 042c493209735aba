"""traffic.tool: command, a user's multipath tool in place of iperf3 (pure parts)."""
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios.spec.loader import ScenarioError, parse_scenario
from topologies.kinds import plan

from runners.traffic import command

REPO = Path(__file__).resolve().parents[2]
BASE = """\
name: t
topology:
  kind: dual-homed
  paths: [{name: A, bw: 10}, {name: B, bw: 10}]
traffic:
  tool: command
  duration: 5
  command:
    server: [mpt-server, --listen, "{server_ip}", --port, "{port}"]
    client: [mpt-client, "{server_ip}", "--via={server_ip:B}", -t, "{duration}"]
    ready_port: 5201
"""


def test_placeholders_fill_word_by_word():
    s = parse_scenario(BASE)
    values = command.command_values(s, plan(s), "A", 5201)
    assert command.fill(s.traffic.command.client, values) == ["mpt-client", "10.0.1.2", "--via=10.0.2.2", "-t", "5"]
    assert command.fill(s.traffic.command.server, values) == ["mpt-server", "--listen", "10.0.1.2", "--port", "5201"]
    # a value with spaces stays one word: no shell is involved
    assert command.fill(["x{client_ip}y"], {"client_ip": "a b"}) == ["xa by"]


def test_doubled_braces_are_literal_braces():
    """curl's -w '%{time_total}' (issue 28): {{ and }} are braces, as in str.format; placeholders still fill."""
    s = parse_scenario(BASE.replace('-t, "{duration}"', '-w, "%{{time_total}} {{{port}}}", "}}{{"'))
    values = command.command_values(s, plan(s), "A", 5201)
    assert command.fill(s.traffic.command.client, values)[-2:] == ["%{time_total} {5201}", "}{"]


SETUP = '    ready_port: 5201\n    setup_client: [[ip, "{client_ip:B}"]]\n    setup_server: [[a], [b, "{port}"]]\n'


def test_setup_commands_fill_like_the_others():
    s = parse_scenario(BASE.replace("    ready_port: 5201\n", SETUP))
    values = command.command_values(s, plan(s), "A", 5201)
    assert [command.fill(a, values) for a in s.traffic.command.setup_server] == [["a"], ["b", "5201"]]
    assert command.fill(s.traffic.command.setup_client[0], values) == ["ip", "10.0.2.1"]


@pytest.mark.parametrize("old,new,msg", [
    ('"{duration}"', '"{colour}"', "unknown placeholder {colour}"),
    ('"{duration}"', '"%{time_total}"', "write {{ and }} for a literal brace"),
    ('"{duration}"', '"{{duration}"', "a single } in '{{duration}' opens or closes no placeholder"),
    ("{server_ip:B}", "{server_ip:Z}", "{server_ip:Z} names no path"),
    ("{server_ip:B}", "{port:B}", "traffic.command.client (line 10): {port:B} in '--via={port:B}': only "
                                 "{server_ip:PATH} and {client_ip:PATH} name a path (use {port})"),
    # the setup commands are checked like client and server (they were not: both failed only at run time)
    ("    ready_port: 5201\n", SETUP.replace("{client_ip:B}", "{client_ip:Z}"),
     "traffic.command.setup_client[0] (line 12): {client_ip:Z} names no path (paths: A, B)"),
    ("    ready_port: 5201\n", SETUP.replace('"{port}"', '"{port:A}"'),
     "traffic.command.setup_server[1] (line 13): {port:A} in '{port:A}': only"),
    ("    ready_port: 5201\n", SETUP.replace('"{port}"', '"{colour}"'),
     "traffic.command.setup_server[1] (line 13): unknown placeholder {colour}"),
    ("    client: [mpt-client", "    clients: [mpt-client", "traffic.command.clients"),
    ("  tool: command\n", "  tool: iperf3\n", "traffic.command (line 8): only with tool: command"),
])
def test_bad_command_tools(old, new, msg):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(BASE.replace(old, new), "c.yaml")
    assert msg in e.value.render(), e.value.render()


def test_numbers_are_words_but_other_types_are_not():
    s = parse_scenario(BASE.replace('-t, "{duration}"', "-t, 10, -w, 2.5"))
    assert s.traffic.command.client[-4:] == ["-t", "10", "-w", "2.5"]
    with pytest.raises(ScenarioError, match=r"traffic.command.client\[1\] \(line 10\): must be text \(put it in quotes\) \(got True\)"):
        parse_scenario(BASE.replace('"{server_ip}", "--via', 'true, "--via'))


def test_command_tool_needs_a_command():
    with pytest.raises(ScenarioError, match="tool: command needs a `command:` section"):
        parse_scenario(BASE[:BASE.index("  command:")])


def test_cli_refuses_commands_unless_allowed(tmp_path):
    f = tmp_path / "tool.yaml"
    f.write_text(BASE)
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--out", str(tmp_path / "o")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-commands" in r.stderr
    assert not (tmp_path / "o").exists()


def test_a_controller_app_file_is_code_and_needs_the_flag_too(tmp_path):
    """A scenario's own controller app runs as root: refused without --allow-commands, named in full."""
    import subprocess
    import sys
    app = tmp_path / "elsewhere" / "evil.py"
    app.parent.mkdir()
    app.write_text("import os\n")
    f = tmp_path / "s.yaml"
    f.write_text(f"""name: s
topology:
  kind: switched
  server: h1
  clients: [h2]
  switches: [{{name: s1, type: ovs-user, controller: true}}]
  controller: {{app: {app}}}
  links:
    - {{name: a, between: [h1, s1]}}
    - {{name: b, between: [h2, s1]}}
  paths: [{{name: P, client_if: 0, server_if: 0}}]
""")
    r = subprocess.run([sys.executable, "-m", "runners.cli", str(f), "--out", str(tmp_path / "o")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-commands" in r.stderr
    assert f"topology.controller.app: the Python file {app}" in r.stderr
    assert not (tmp_path / "o").exists()
