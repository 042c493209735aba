"""Batched commands: one process for several argument lists, each result apart, no word parsed by a shell."""
import subprocess

from runners.linux.nsexec import run_batch


class LocalNode:
    """Stands in for a Mininet host: popen runs here, in this namespace."""
    name = "local"

    def popen(self, argv, **kw):
        return subprocess.Popen(argv, **kw)


def test_results_come_back_in_order_with_their_exit_codes_and_stderr():
    res = run_batch(LocalNode(), [["echo", "one"], ["sh", "-c", "echo two; echo oops >&2; exit 3"],
                                  ["printf", "%s", "no newline"], ["true"]], check=False)
    assert [r.rc for r in res] == [0, 3, 0, 0]
    assert res[0].out == "one\n" and res[1].out == "two\n" and res[1].err == "oops\n"
    assert res[2].out == "no newline" and res[3].out == ""


def test_hostile_words_reach_the_command_verbatim(tmp_path):
    canary = tmp_path / "canary"
    words = [f"; touch {canary}", f"$(touch {canary})", f"`touch {canary}`", '"${1}" $HOME', "a\nb", "*", ""]
    res = run_batch(LocalNode(), [["printf", "%s|", *words]])
    assert res[0].out == "|".join(words) + "|"
    assert not canary.exists()


def test_many_arguments_are_addressed_beyond_nine():
    words = [str(i) for i in range(25)]
    assert run_batch(LocalNode(), [["echo", *words]])[0].out.split() == words


def test_a_failure_is_raised_with_the_command_when_checked():
    try:
        run_batch(LocalNode(), [["true"], ["sh", "-c", "echo bad >&2; exit 2"]])
    except Exception as e:
        assert "exit 2" in str(e) and "bad" in str(e)
    else:
        raise AssertionError("no error raised")


def test_sysctl_writes_use_proc_sys_without_the_sysctl_program(tmp_path, monkeypatch):
    """The batch's sysctl function writes /proc/sys itself; other forms run the program on PATH."""
    decoy = tmp_path / "sysctl"
    decoy.write_text("#!/bin/sh\necho decoy\n")
    decoy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    missing, other = run_batch(LocalNode(), [["sysctl", "-q", "-w", "net.no.such.key=1 2"],
                                             ["sysctl", "-n", "kernel.ostype"]], check=False)
    assert missing.rc != 0 and "/proc/sys/net/no/such/key" in missing.err
    assert other.out.strip() == "decoy"   # any other form is the real program's
