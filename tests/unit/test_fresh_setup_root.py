"""When the fresh-machine test starts Debian 12 from the root that setup.sh set up in an earlier full run
(tests/fresh/setup_root.py), and how it keeps that root and replaces the checkout in it: on a fake
checkout and cache, no root, no debootstrap."""
from __future__ import annotations

import calendar
import inspect
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.fresh import chroot, setup_root
from tests.fresh.test_fresh_machine import SCENARIO, SETUP

REPO = Path(__file__).resolve().parents[2]
SET_UP = calendar.timegm((2026, 11, 27, 5, 0, 0))   # the kept root's setup.sh finished then
DAY = 86400


def keep(checkout: Path, cache: Path, suite: str = "bookworm", set_up: float = SET_UP) -> Path:
    """What a passing full run leaves: the staged root promoted, its stamp beside it."""
    cache.mkdir(parents=True, exist_ok=True)
    staged = setup_root.staged_path(cache, suite)
    staged.write_bytes(b"a root\n")
    return setup_root.promote(staged, setup_root.make_stamp(suite, checkout, set_up, staged), cache, suite)


def test_a_kept_root_is_reused_while_its_setup_files_are_unchanged_and_it_is_a_week_old_at_most(checkout, tmp_path):
    cache = tmp_path / "cache"
    tarball = keep(checkout, cache)
    for age in (0, 3.5 * DAY, setup_root.MAX_AGE_DAYS * DAY):
        kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP + age)
        assert kept == tarball
        assert why == ("Debian 12: root set up by setup.sh on 2026-11-27 05:00:00 UTC reused (setup files "
                       "unchanged): the scenario and unit suite run on this checkout")
    (checkout / "README.md").write_text("not a setup file\n")
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] == tarball


def test_no_kept_root_means_a_full_run(checkout, tmp_path):
    cache = tmp_path / "cache"
    kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)
    assert kept is None
    assert why == f"Debian 12: full run: no set-up root kept on this machine ({cache / 'bookworm-set-up.tar'})"
    keep(checkout, cache)
    setup_root.tarball_path(cache, "bookworm").unlink()   # a stamp without its tarball
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] is None


def test_a_kept_root_older_than_a_week_means_a_full_run(checkout, tmp_path):
    cache = tmp_path / "cache"
    keep(checkout, cache)
    kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP + 8 * DAY)
    assert kept is None
    assert why == ("Debian 12: full run: the kept root was set up on 2026-11-27 05:00:00 UTC, 8.0 days ago (more "
                   "than 7: Debian's mirror and PyPI have moved since)")
    kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP - DAY)   # the clock went back
    assert kept is None and "unreadable or to come" in why


@pytest.mark.parametrize("change", ["setup.sh", "requirements.txt", "pyproject.toml", "setup.py",
                                    "requirements-extra.txt"])
def test_a_changed_or_new_setup_file_means_a_full_run_that_names_it(checkout, tmp_path, change):
    cache = tmp_path / "cache"
    keep(checkout, cache)
    (checkout / change).write_text("changed\n")
    kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)
    assert kept is None
    assert why == (f"Debian 12: full run: {change} changed since setup.sh set up the kept root on "
                   f"2026-11-27 05:00:00 UTC")


def test_testbed_fresh_all_forces_a_full_run(checkout, tmp_path):
    cache = tmp_path / "cache"
    keep(checkout, cache)
    assert setup_root.decide("bookworm", checkout, cache, env={"TESTBED_FRESH_ALL": "1"}, now=SET_UP) == (
        None, "Debian 12: full run: TESTBED_FRESH_ALL=1")


def test_debian_13_always_starts_from_the_minimal_root(checkout, tmp_path):
    cache = tmp_path / "cache"
    keep(checkout, cache, suite="trixie")
    assert setup_root.decide("trixie", checkout, cache, env={}, now=SET_UP) == (
        None, "Debian 13: full run: only Debian 12's set-up root is kept")


def test_a_stamp_that_does_not_describe_the_tarball_means_a_full_run(checkout, tmp_path):
    cache = tmp_path / "cache"
    tarball = keep(checkout, cache)
    stamp = setup_root.read_stamp(cache, "bookworm")
    assert stamp["release"] == "bookworm" and stamp["bytes"] == tarball.stat().st_size == 7
    assert stamp["set_up"] == "2026-11-27 05:00:00 UTC" and stamp["hash"] and "setup.sh" in stamp["file_hashes"]
    tarball.write_bytes(b"another root, or a half-copied one\n")
    kept, why = setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)
    assert kept is None and "does not describe" in why
    setup_root.stamp_path(cache, "bookworm").write_text("{not json")
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] is None


def test_promote_replaces_the_kept_root_and_its_stamp_and_leaves_no_staged_file(checkout, tmp_path):
    cache = tmp_path / "cache"
    keep(checkout, cache)
    (checkout / "setup.sh").write_text("v2\n")
    tarball = keep(checkout, cache, set_up=SET_UP + DAY)
    assert tarball.read_bytes() == b"a root\n" and not setup_root.staged_path(cache, "bookworm").exists()
    assert sorted(p.name for p in cache.iterdir()) == ["bookworm-set-up.json", "bookworm-set-up.tar"]
    assert json.loads(setup_root.stamp_path(cache, "bookworm").read_text())["set_up"] == "2026-11-28 05:00:00 UTC"
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP + DAY)[0] == tarball


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
                   check=True, capture_output=True)


def test_remove_tracked_keeps_what_setup_sh_made_and_drops_the_old_checkout(tmp_path):
    dest = tmp_path / "checkout"
    for name in ("setup.sh", "runners/cli.py", "runners/gone/old.py", ".gitignore"):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text("old\n")
    (dest / ".gitignore").write_text(".venv/\n__pycache__/\n")
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "old")
    for name in (".venv/.testbed-installed", "runners/__pycache__/cli.cpython-311.pyc"):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text("made by setup.sh\n")
    setup_root.remove_tracked(dest)
    left = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert left == [".venv", ".venv/.testbed-installed", "runners", "runners/__pycache__",
                    "runners/__pycache__/cli.cpython-311.pyc"]


def test_unpacking_swaps_the_chroots_tarball_only_while_open(tmp_path):
    minimal = chroot.base_tarball
    with setup_root.unpacking(tmp_path / "kept.tar"):
        assert chroot.base_tarball("bookworm") == tmp_path / "kept.tar"
    assert chroot.base_tarball is minimal
    with setup_root.unpacking(None):
        assert chroot.base_tarball is minimal


def test_the_two_steps_are_the_readmes_first_command():
    first = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("./setup.sh && "))
    assert f"{SETUP} && {SCENARIO}" == first + " --backend vm"


def test_make_stamp_dates_the_root_in_utc(checkout, tmp_path):
    (tmp_path / "t.tar").write_bytes(b"x")
    stamp = setup_root.make_stamp("bookworm", checkout, time.time(), tmp_path / "t.tar")
    assert stamp["set_up"].endswith(" UTC") and 0 <= setup_root.age_days(stamp, time.time()) < 0.01


def test_a_full_run_sweeps_what_a_killed_run_left_staged_and_nothing_else(checkout, tmp_path):
    cache = tmp_path / "cache"
    tarball = keep(checkout, cache)
    left = setup_root.staged_files(cache, "bookworm")
    assert [p.name for p in left] == ["bookworm-set-up.tar.staged", "bookworm-set-up.tar.staged.tmp"]
    for path in left:
        path.write_bytes(b"half a root\n")
    setup_root.staged_path(cache, "trixie").write_bytes(b"another release's\n")
    assert setup_root.sweep_staged(cache, "bookworm") == left
    assert sorted(p.name for p in cache.iterdir()) == ["bookworm-set-up.json", "bookworm-set-up.tar",
                                                       "trixie-set-up.tar.staged"]
    assert setup_root.sweep_staged(cache, "bookworm") == []
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] == tarball


def test_forget_makes_the_next_run_a_full_one(checkout, tmp_path):
    cache = tmp_path / "cache"
    keep(checkout, cache)
    assert setup_root.forget(cache, "bookworm") == [setup_root.stamp_path(cache, "bookworm"),
                                                    setup_root.tarball_path(cache, "bookworm")]
    assert list(cache.iterdir()) == []
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] is None
    assert setup_root.forget(cache, "bookworm") == []


def test_the_kept_root_is_root_s_alone(checkout, tmp_path):
    cache = tmp_path / "cache"
    staged = setup_root.staged_path(cache, "bookworm")
    cache.mkdir()
    staged.write_bytes(b"a root\n")
    staged.chmod(0o644)
    tarball = setup_root.promote(staged, setup_root.make_stamp("bookworm", checkout, SET_UP, staged), cache, "bookworm")
    assert tarball.stat().st_mode & 0o777 == 0o600


def test_the_snapshot_s_tar_is_0600_and_leaves_out_the_hosts_pip_and_apt_config(tmp_path):
    """snapshot()'s tar command as it runs after its bind mount (here on the folder itself: no root)."""
    root = tmp_path / "root"
    names = ["etc/pip.conf", "etc/apt/apt.conf.d/99artifact-registry", "etc/apt/apt.conf.d/70debconf",
             "etc/resolv.conf", "etc/ssl/certs/ca-certificates.crt", "home/user/mptcp-testbed/etc/pip.conf"]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    out = tmp_path / "root.tar"
    subprocess.run(["sh", "-c", setup_root.TAR, "sh", str(root), str(root), str(out)], check=True)
    assert out.stat().st_mode & 0o777 == 0o600
    files = subprocess.run(["tar", "-tf", str(out)], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(f for f in files if not f.endswith("/")) == sorted(f"./{n}" for n in names[2:])
    # each is what Chroot copies in from the host (and copies in again on a reuse)
    copying = inspect.getsource(chroot.Chroot._copy_network_trust)
    assert all(f'"{name}"' in copying for name in setup_root.NOT_KEPT)


@pytest.mark.parametrize("error", [subprocess.CalledProcessError(2, "tar"), subprocess.TimeoutExpired("tar", 900),
                                   OSError(28, "No space left on device")])
def test_a_root_that_cannot_be_staged_is_not_kept_and_the_test_goes_on(tmp_path, monkeypatch, capsys, error):
    staged = tmp_path / "bookworm-set-up.tar.staged"

    def failing(root, out):
        out.write_bytes(b"part of a root\n")
        raise error
    monkeypatch.setattr(setup_root, "snapshot", failing)
    assert setup_root.stage(tmp_path / "root", staged, "Debian 12") is False
    assert not staged.exists()
    assert f"Debian 12: the root as setup.sh left it is not kept (staging it failed: {error}); the test goes on" \
        in capsys.readouterr().out
    monkeypatch.setattr(setup_root, "snapshot", lambda root, out: out.write_bytes(b"a root\n"))
    assert setup_root.stage(tmp_path / "root", staged, "Debian 12") is True and staged.is_file()


@pytest.mark.parametrize("end", [AssertionError("the scenario failed"), KeyboardInterrupt(),
                                 subprocess.TimeoutExpired("chroot", 900)])
def test_a_reuse_that_does_not_pass_removes_the_kept_root(checkout, tmp_path, capsys, end):
    cache = tmp_path / "cache"
    tarball = keep(checkout, cache)
    with pytest.raises(type(end)):
        with setup_root.forgotten_unless_passed(tarball, cache, "bookworm", "Debian 12"):
            raise end
    assert list(cache.iterdir()) == []
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] is None
    assert (f"Debian 12: the run on the reused root did not pass: the kept root is removed "
            f"({cache / 'bookworm-set-up.json'}, {tarball}), so the next run is a full one") in capsys.readouterr().out


def test_a_reuse_that_passes_and_a_full_run_that_fails_keep_the_kept_root(checkout, tmp_path):
    cache = tmp_path / "cache"
    tarball = keep(checkout, cache)
    with setup_root.forgotten_unless_passed(tarball, cache, "bookworm", "Debian 12"):
        pass
    with pytest.raises(AssertionError):
        with setup_root.forgotten_unless_passed(None, cache, "bookworm", "Debian 12"):
            raise AssertionError("a full run failed: its staged root goes, the kept one stays")
    assert setup_root.decide("bookworm", checkout, cache, env={}, now=SET_UP)[0] == tarball
