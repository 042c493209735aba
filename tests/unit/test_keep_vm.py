"""A warm VM's idle time: --keep-vm and TESTBED_KEEP_VM parsed, which wins, CI off by default, and the
arithmetic that `vm status` and `run-scenario clean` use."""
import pytest

from runners.backends.vm.keep import (DEFAULT_KEEP_SECONDS, OUTLIVED_GRACE_SECONDS, describe, keep_setting,
    outlived, parse_keep, time_left)
from runners.cli import main


@pytest.mark.parametrize("text, seconds", [("600s", 600), ("10min", 600), ("1h", 3600), ("1.5h", 5400),
                                           ("0s", 0), ("0", 0), ("90 s", 90), ("2500ms", 2.5)])
def test_durations_carry_a_unit(text, seconds):
    assert parse_keep(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["600", "10m", "ten minutes", "-5s", "", "1d"])
def test_a_bare_number_or_an_unknown_unit_is_refused(text):
    with pytest.raises(ValueError, match="is not a duration like '600s', '10min' or '1h'"):
        parse_keep(text)


def test_the_option_wins_then_the_variable_then_ci_then_the_default():
    assert keep_setting(None, {}) == (DEFAULT_KEEP_SECONDS, "default")
    assert keep_setting(None, {"CI": "true"}) == (0, "CI is set")
    assert keep_setting(None, {"TESTBED_IN_VM": "1"}) == (0, "inside a micro-VM")
    assert keep_setting(None, {"CI": "true", "TESTBED_KEEP_VM": "5min"}) == (300, "TESTBED_KEEP_VM")
    assert keep_setting(None, {"TESTBED_KEEP_VM": "0"}) == (0, "TESTBED_KEEP_VM")
    assert keep_setting("20s", {"CI": "1", "TESTBED_KEEP_VM": "0"}) == (20, "--keep-vm")
    assert keep_setting("0s", {}) == (0, "--keep-vm")
    assert keep_setting(None, {"TESTBED_KEEP_VM": "  "}) == (DEFAULT_KEEP_SECONDS, "default")


def test_a_bad_value_is_named_by_where_it_came_from():
    with pytest.raises(ValueError, match=r"^--keep-vm is not a duration.*got '10'"):
        keep_setting("10", {})
    with pytest.raises(ValueError, match=r"^TESTBED_KEEP_VM is not a duration.*got 'soon'"):
        keep_setting(None, {"TESTBED_KEEP_VM": "soon"})


def test_the_command_line_refuses_a_bad_idle_time_before_anything_starts(capsys, monkeypatch):
    with pytest.raises(SystemExit) as e:
        main(["scenarios/two-paths.yaml", "--keep-vm", "10"])
    assert e.value.code == 2 and "--keep-vm is not a duration" in capsys.readouterr().err
    monkeypatch.setenv("TESTBED_KEEP_VM", "later")
    with pytest.raises(SystemExit) as e:
        main(["scenarios/two-paths.yaml", "--dry-run"])
    assert e.value.code == 2 and "TESTBED_KEEP_VM is not a duration" in capsys.readouterr().err
    for bad in ("0s", "soon"):
        with pytest.raises(SystemExit) as e:
            main(["vm", "up", "--keep-vm", bad])
        assert e.value.code == 2 and "--keep-vm" in capsys.readouterr().err


def test_describe():
    assert [describe(s) for s in (600, 90, 5400, 3600, 125)] == ["10 min", "90 s", "1.5 h", "1 h", "125 s"]


def test_time_left_counts_down_from_the_last_job_and_never_below_zero():
    assert time_left(600, 1000.0, 1000.0) == 600
    assert time_left(600, 1000.0, 1450.0) == 150
    assert time_left(600, 1000.0, 9999.0) == 0
    assert time_left(None, 1000.0, 1450.0) is None    # `vm up` without --keep-vm: until `vm down`
    assert time_left(600, None, 1450.0) is None       # a job is running


def test_outlived_only_past_the_idle_time_and_the_grace():
    assert not outlived(600, 1000.0, 1000.0 + 600 + OUTLIVED_GRACE_SECONDS - 1)
    assert outlived(600, 1000.0, 1000.0 + 600 + OUTLIVED_GRACE_SECONDS + 1)
    assert not outlived(None, 1000.0, 10**9)
    assert not outlived(600, None, 10**9)
