"""The lab handouts (labs/*.md): every run-scenario command in them parses as run-scenario would read it,
every file it names exists, every scenario loads with the variants, points and primaries it asks for,
and each lab has its parts and its answer key."""
import re
import shlex
from pathlib import Path

import pytest
from scenarios.spec.loader import load_experiment

from runners.cli import parse_command_line
from runners.runset.checks import select_variants

REPO = Path(__file__).resolve().parents[2]
LABS = REPO / "labs"
HANDOUTS = sorted(LABS.glob("lab[0-9]-*.md"))
SECTIONS = ("## Objective", "## Steps", "## Questions", "## What you should see")


def shell_lines(text: str) -> list[str]:
    """The command lines of the ```sh blocks, comments and prompts removed, continuations joined."""
    lines, joined = [], ""
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for raw in block.splitlines():
            line = joined + raw.split(" #")[0].rstrip()
            joined = ""
            if line.endswith("\\"):
                joined = line[:-1] + " "
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.strip())
    return lines


def run_scenario_commands(text: str) -> list[list[str]]:
    """The arguments of every run-scenario command, up to a pipe, a list operator or a redirection."""
    out = []
    for line in shell_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word and set(word) <= set("&|;<>()"):
                names = [i for i, w in enumerate(command) if w.endswith("run-scenario")]
                if names:
                    out.append(command[names[0] + 1:])
                command = [] if word != ">" else ["> "]     # a redirection's target is no argument
                continue
            if command == ["> "]:
                command = []
                continue
            command.append(word)
    return out


def test_there_are_six_labs_and_an_index():
    assert [h.name.split("-")[0] for h in HANDOUTS] == [f"lab{i}" for i in range(1, 7)]
    index = (LABS / "README.md").read_text()
    for h in HANDOUTS:
        assert f"({h.name})" in index, h.name


@pytest.mark.parametrize("handout", HANDOUTS, ids=lambda p: p.stem)
def test_handout_has_its_parts_and_an_answer_key(handout):
    text = handout.read_text()
    for section in SECTIONS:
        assert section in text, f"{handout.name}: no '{section}'"
    questions = text.split("## Questions", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^\d+\. ", questions, flags=re.M)) >= 3, f"{handout.name}: fewer than 3 questions"
    key = LABS / "answers" / handout.name
    assert key.exists(), f"no answer key {key.relative_to(REPO)}"
    answers = key.read_text()
    assert len(re.findall(r"^\d+\. ", answers, flags=re.M)) >= len(re.findall(r"^\d+\. ", questions, flags=re.M))


@pytest.mark.parametrize("handout", HANDOUTS, ids=lambda p: p.stem)
def test_every_command_in_the_handout_parses_and_names_files_that_exist(handout, capsys):
    text = handout.read_text()
    commands = run_scenario_commands(text)
    assert commands, f"{handout.name}: no run-scenario command"
    made = {m for line in shell_lines(text) for m in re.findall(r">\s*([\w./-]+)", line)}   # files a step writes
    for argv in commands:
        try:
            name, args = parse_command_line(argv)
        except SystemExit:
            pytest.fail(f"{handout.name}: `run-scenario {shlex.join(argv)}` does not parse: "
                        f"{capsys.readouterr().err.strip()}")
        for word in argv:
            if word.endswith((".yaml", ".py")) and not word.startswith("results/") and word not in made:
                assert (REPO / word).exists(), f"{handout.name}: `{word}` does not exist"
        scenario = getattr(args, "scenario", None)
        if isinstance(scenario, list):
            scenario = scenario[0] if scenario else None
        if scenario and scenario.endswith(".yaml") and scenario not in made:
            exp = select_variants(load_experiment(REPO / scenario), args.variant)
            points = {p.id: p for p in exp.points}
            point = getattr(args, "point", None)
            assert point is None or point in points, f"{handout.name}: no point {point} in {scenario}"
            primary = getattr(args, "primary", None)
            if primary is not None:
                assert primary in exp.points[0].scenario.primaries, f"{handout.name}: no primary {primary}"


@pytest.mark.parametrize("handout", HANDOUTS, ids=lambda p: p.stem)
def test_every_lab_scenario_is_used_and_states_its_claim(handout):
    text = handout.read_text()
    named = set(re.findall(r"labs/(lab\d-[\w-]+\.yaml)", text))
    prefix = handout.name.split("-")[0]
    own = {f.name for f in LABS.glob(f"{prefix}-*.yaml")}
    assert own and own <= named, f"{handout.name} does not use {sorted(own - named)}"
    for f in own:
        exp = load_experiment(LABS / f)
        assert exp.scenario.expect, f"{f}: the lab's claim is not an expect"


def test_the_command_extraction_sees_chains_and_continuations():
    text = ("```sh\nsudo .venv/bin/run-scenario a.yaml --repeat 1 && \\\n  .venv/bin/run-scenario list labs  # all\n"
            ".venv/bin/run-scenario export b.yaml > net.py; grep -E 'a|b' x\n```\n")
    assert run_scenario_commands(text) == [["a.yaml", "--repeat", "1"], ["list", "labs"], ["export", "b.yaml"]]


TESTBED_CLI = {"paths", "subflows", "endpoints", "counters", "traffic", "testbed", "exit", "help", "sh", "path", "link",
               "shape"}


def shell_sessions(text: str) -> list[tuple[list[str], list[str]]]:
    """(run-scenario shell arguments, the lines typed at its `mininet>` prompt): each ```sh block that
    opens a shell, and the plain ``` block after it."""
    out = []
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)
    for (lang, body), (next_lang, next_body) in zip(blocks, blocks[1:]):
        opened = [a for a in run_scenario_commands(f"```sh\n{body}```") if a[:1] == ["shell"]] if lang == "sh" else []
        if opened and next_lang == "":
            out.append((opened[0], [x.strip() for x in next_body.splitlines() if x.strip()]))
    return out


@pytest.mark.parametrize("handout", HANDOUTS, ids=lambda p: p.stem)
def test_lines_typed_in_a_shell_name_its_nodes_and_the_servers_addresses(handout):
    """Lab 3 once sent students' iperf3 to a router's address (10.1.3.2, not the server's 10.1.4.2): the
    transfer never started and `subflows` showed nothing. Every line typed at the prompt starts with a
    testbed command or a node of that network, and every iperf3 `-c ADDRESS` is one of the server's addresses."""
    from topologies.kinds import plan

    for argv, typed in shell_sessions(handout.read_text()):
        _, args = parse_command_line(argv)
        exp = select_variants(load_experiment(REPO / args.scenario), args.variant)
        topo = plan(exp.points[0].scenario)
        nodes = set(topo.hosts) | set(topo.routers) | {w.name for w in topo.switches}
        servers = {p.server_ip for p in topo.paths}
        for line in typed:
            first = line.split()[0]
            assert first in TESTBED_CLI or first in nodes, f"{handout.name}: `{line}`: no node {first}"
            if "ovs-ofctl" in line:     # build_network gives OVS switches OpenFlow 1.3 only
                assert "-O OpenFlow13" in line, f"{handout.name}: `{line}` fails: version negotiation"
            for address in re.findall(r"-c\s+(\S+)", line) if "iperf3" in line else []:
                assert address in servers, f"{handout.name}: `{line}`: {address} is not the server's ({servers})"


def test_shell_sessions_are_found_with_what_is_typed_in_them():
    text = "```sh\n.venv/bin/run-scenario shell labs/x.yaml --primary A\n```\n\n```\npaths\nh1 ping -c 1 h2\n```\n"
    assert shell_sessions(text) == [(["shell", "labs/x.yaml", "--primary", "A"], ["paths", "h1 ping -c 1 h2"])]


TIME_ROW = re.compile(r"^\| *(?P<step>[^|]*?) *\| *`(?P<command>[^`]+)` *\| *(?P<took>\d+) s[^|]*"
                      r"\| *(?P<estimate>[^|]*?) *\|$", re.M)


def time_rows(text: str) -> list[tuple[list[str], int, int | None]]:
    """(run-scenario arguments, measured seconds, the --dry-run estimate stated or None) of each row of the
    handout's time table."""
    out = []
    for m in TIME_ROW.finditer(text):
        argv = shlex.split(m["command"])
        names = [i for i, w in enumerate(argv) if w.endswith("run-scenario")]
        assert names, f"`{m['command']}` is not a run-scenario command"
        estimate = re.fullmatch(r"(\d+) s", m["estimate"])
        out.append((argv[names[0] + 1:], int(m["took"]), int(estimate[1]) if estimate else None))
    return out


def scenario_as_made(text: str, name: str):
    """The scenario a handout's command names: a file of the repository, or one a step makes from one with
    `sed 's/x/y/; ...' labs/lab.yaml > name` (lab 2's step 5)."""
    from scenarios.spec.loader import parse_experiment

    if (REPO / name).exists():
        return load_experiment(REPO / name)
    made = next(line for line in shell_lines(text) if re.search(rf">\s*{re.escape(name)}$", line))
    script, source = re.fullmatch(r"sed '([^']*)' (\S+) >.*", made).groups()
    yaml = (REPO / source).read_text()
    for old, new in re.findall(r"s/((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/", script):
        yaml = re.sub(old, new, yaml, flags=re.M)
    return parse_experiment(yaml, name)


def test_time_rows_are_read_with_and_without_an_estimate():
    text = ("| step | command | took | `--dry-run` estimated |\n|---|---|---|---|\n"
            "| 2 | `.venv/bin/run-scenario labs/x.yaml --repeat 1` | 143 s (2 min 23 s) | 150 s |\n"
            "| 4 | `.venv/bin/run-scenario shell labs/x.yaml` | 80 s to the prompt | - |\n")
    assert time_rows(text) == [(["labs/x.yaml", "--repeat", "1"], 143, 150), (["shell", "labs/x.yaml"], 80, None)]


@pytest.mark.parametrize("handout", HANDOUTS, ids=lambda p: p.stem)
def test_the_handout_states_measured_times_that_the_dry_run_estimate_is_within_15_percent_of(handout):
    """Lab 4 once said "about 2.5 minutes (145 s)" in one place and "3 min 18 s" in another, while
    `--dry-run` estimated 99 s of the 152 s measured. Each handout has a table of the times its commands
    took, dated, with the machine; each lab scenario's run is in it, with the estimate `--dry-run` prints
    on a fresh clone (the TCG VM's default costs), which must be the code's and within 15 % of the time."""
    from runners.runset.estimate import DEFAULTS, job_table

    text = handout.read_text()
    rows = time_rows(text)
    assert rows, f"{handout.name}: no table of measured times"
    table = text[text.index(next(m.group(0) for m in TIME_ROW.finditer(text))) - 600:]
    assert re.search(r"measured on \d{4}-\d\d-\d\d", table[:600]), f"{handout.name}: the times have no date"
    assert "TCG" in table[:600] and "2-core" in table[:600], f"{handout.name}: the times do not name the machine"
    estimated = set()
    for argv, took, stated in rows:
        if stated is None:
            continue
        _, args = parse_command_line(argv)
        exp = select_variants(scenario_as_made(text, args.scenario[0]), args.variant)
        _, _, total = job_table(exp, args.repeat, DEFAULTS["vm"], capture=bool(args.capture))
        assert stated == round(total), f"{handout.name}: `{shlex.join(argv)}`: the code estimates {total:.0f} s"
        assert abs(total - took) <= 0.15 * took, \
            f"{handout.name}: `{shlex.join(argv)}`: estimated {total:.0f} s, measured {took} s"
        estimated.add(args.scenario[0])
    prefix = handout.name.split("-")[0]
    own = {f"labs/{f.name}" for f in LABS.glob(f"{prefix}-*.yaml")}
    assert own <= estimated, f"{handout.name}: no measured time with its estimate for {sorted(own - estimated)}"


def test_the_lab_index_gives_the_handouts_times():
    index = (LABS / "README.md").read_text()
    for h in HANDOUTS:
        row = next(line for line in index.splitlines() if f"({h.name})" in line)
        for seconds in re.findall(r"(\d+) s\b", row.split("|")[-2]):
            assert int(seconds) in {took for _, took, _ in time_rows(h.read_text())}, \
                f"labs/README.md: {h.name}'s {seconds} s is not in its handout's table"
