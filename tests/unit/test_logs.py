"""commands.log and run.log, without root: the line formats, whole lines from many threads, colour codes
left out, and a log that never holds its file open."""
import re
import sys
import threading

from runners.console.runlog import RUN_LOG
from runners.linux.commandlog import CommandLog, Timed


def test_a_command_line_per_command_with_node_exit_code_and_seconds(tmp_path, capsys):
    log = CommandLog()
    log.open(tmp_path / "commands.log", echo=True)
    log.record("h1", ["ip", "mptcp", "endpoint", "add", "10.0.2.1", "dev", "h1-eth1", "subflow"], 0, 0.0123)
    log.record("h2", ["sh", "-c", "a b; c"], 2, 1.5)
    threads = [threading.Thread(target=log.announce, args=(f"h{i}", ["sysctl", "-q", "-w", f"k{i}=1"]))
               for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()                                   # lines are written in batches; closing writes the rest
    lines = (tmp_path / "commands.log").read_text().splitlines()
    assert lines[0].startswith("# utc\tnode\texit\tseconds")
    assert re.fullmatch(r"\S+Z\th1\t0\t0\.012\tip mptcp endpoint add 10\.0\.2\.1 dev h1-eth1 subflow", lines[1])
    assert lines[2].endswith("\th2\t2\t1.500\tsh -c 'a b; c'")              # quoted as a shell would need
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 20 and all(re.fullmatch(r"\[h\d+\] sysctl -q -w k\d+=1", x) for x in out)


def test_timed_records_the_exit_code_set_inside(tmp_path):
    from runners.linux import commandlog
    saved = commandlog.COMMANDS.path
    commandlog.COMMANDS.open(tmp_path / "c.log")
    try:
        with Timed("host", ["true"]) as t:
            t.rc = 0
        commandlog.COMMANDS.close()
    finally:
        commandlog.COMMANDS.path = saved
    assert "\thost\t0\t" in (tmp_path / "c.log").read_text()


def test_run_log_keeps_whole_lines_without_colour_codes(tmp_path):
    RUN_LOG.start(tmp_path / "run.log")
    try:
        print("results: x")
        sys.stdout.write("\x1b[1mbold\x1b[0m and ")
        sys.stdout.write("the rest\n")
        print("an error", file=sys.stderr)
        sys.stdout.write("no newline yet")
    finally:
        RUN_LOG.stop()
    assert (tmp_path / "run.log").read_text() == "results: x\nbold and the rest\nan error\nno newline yet\n"
    assert not isinstance(sys.stdout, type(None)) and "Tee" not in type(sys.stdout).__name__
