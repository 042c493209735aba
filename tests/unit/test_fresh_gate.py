"""The fresh-machine test's choice of releases (tests/fresh/gate.py) and its leftovers check, on a fake
checkout and cache: no root, no debootstrap."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.fresh import gate
from tests.fresh.chroot import host_state, left_behind
from tests.fresh.test_fresh_machine import pip_complaints


def test_bookworm_runs_every_time_and_trixie_until_it_has_passed(checkout, tmp_path):
    cache = tmp_path / "cache"
    assert gate.decide("bookworm", checkout, cache, env={})[0]
    runs, why = gate.decide("trixie", checkout, cache, env={})
    assert runs and "no pass recorded" in why
    gate.record_pass("trixie", checkout, cache)
    runs, why = gate.decide("trixie", checkout, cache, env={})
    assert not runs
    assert why.startswith("Debian 13 (trixie) skipped: pyproject.toml, requirements.txt, setup.py, setup.sh are as")
    assert str(gate.stamp_path(cache, "trixie")) in why and "TESTBED_FRESH_ALL=1" in why
    assert gate.decide("trixie", checkout, cache, env={"TESTBED_FRESH_ALL": "1"})[0]


@pytest.mark.parametrize("change", ["setup.sh", "requirements.txt", "pyproject.toml", "setup.py",
                                    "requirements-extra.txt"])
def test_trixie_runs_again_when_a_setup_file_changes_or_appears(checkout, tmp_path, change):
    cache = tmp_path / "cache"
    gate.record_pass("trixie", checkout, cache)
    (checkout / change).write_text("changed\n")
    runs, why = gate.decide("trixie", checkout, cache, env={})
    assert runs and why.startswith(f"Debian 13 (trixie) runs: {change} changed since its pass of"), why


def test_a_removed_setup_file_is_named_and_an_older_stamp_names_them_all(checkout, tmp_path):
    cache = tmp_path / "cache"
    gate.record_pass("trixie", checkout, cache)
    (checkout / "setup.py").unlink()
    assert "runs: setup.py changed since" in gate.decide("trixie", checkout, cache, env={})[1]
    stamp = gate.read_stamp(cache, "trixie")
    del stamp["file_hashes"]   # as the first stamps were written
    gate.stamp_path(cache, "trixie").write_text(json.dumps(stamp))
    assert "runs: pyproject.toml, requirements.txt, setup.sh changed since" in gate.decide("trixie", checkout, cache,
                                                                                           env={})[1]


def test_other_files_do_not_make_trixie_run_again(checkout, tmp_path):
    cache = tmp_path / "cache"
    gate.record_pass("trixie", checkout, cache)
    (checkout / "README.md").write_text("changed\n")
    (checkout / "runners").mkdir()
    (checkout / "runners" / "setup.py").write_text("not the top level's\n")
    assert not gate.decide("trixie", checkout, cache, env={})[0]


def test_a_stamp_holds_the_hash_files_and_date_and_a_broken_one_means_run(checkout, tmp_path):
    cache = tmp_path / "cache"
    stamp = json.loads(gate.record_pass("trixie", checkout, cache).read_text())
    assert stamp["hash"] == gate.setup_hash(checkout) and len(stamp["hash"]) == 64
    assert stamp["files"] == ["pyproject.toml", "requirements.txt", "setup.py", "setup.sh"]
    assert stamp["passed"].endswith("UTC")
    gate.stamp_path(cache, "trixie").write_text("{not json")
    assert gate.decide("trixie", checkout, cache, env={})[0]


def test_renaming_a_setup_file_changes_the_hash(checkout):
    first = gate.setup_hash(checkout)
    (checkout / "requirements.txt").rename(checkout / "requirements-vm.txt")
    assert gate.setup_hash(checkout) != first


def test_left_behind_names_what_the_host_gained_only():
    before = {"mounts": Counter({"/ (ext4 /dev/vda)": 1, "/run/netns (ext4 /dev/vda)": 1}),
              "links": Counter({"lo": 1, "eth0": 1})}
    after = {"mounts": Counter({"/ (ext4 /dev/vda)": 1, "/run/netns (ext4 /dev/vda)": 2,
                                "/tmp/r/run/netns (ext4 /dev/vda)": 1}),
             "links": Counter({"lo": 1, "veth0": 1})}
    assert left_behind(before, after) == ["mounts: /run/netns (ext4 /dev/vda)",
                                          "mounts: /tmp/r/run/netns (ext4 /dev/vda)", "links: veth0"]
    assert left_behind(before, before) == []


def test_host_state_reads_this_machines_mounts_and_links():
    state = host_state()
    # in a chroot the mount table holds only what is mounted under its root (/proc is, in the fresh roots)
    assert any(entry.startswith("/proc (proc ") for entry in state["mounts"]) and "lo" in state["links"]


def test_pip_complaints_are_its_errors_and_the_legacy_editable_install():
    output = ("setup.sh: installing mininet\n"
              "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
              "installed.\n"
              "oslo-utils 8.2.0 requires tzdata>=2022.4, which is not installed.\n"
              "DEPRECATION: Legacy editable install of mptcp-testbed==0.1.0 from file:///x (setup.py develop) is "
              "deprecated.\n"
              "setup.sh: done in 188 s.\n")
    assert [line[:30] for line in pip_complaints(output)] == ["ERROR: pip's dependency resolv",
                                                               "DEPRECATION: Legacy editable i"]
    assert pip_complaints("setup.sh: done in 17 s.\nno ERROR: here, mid-line\n") == []


def test_a_suite_gated_on_files_in_subfolders_runs_again_when_one_of_them_changes(checkout, tmp_path):
    """The Vagrant test's gate (tests/vagrant): its patterns reach into folders; the stamp names each file by
    its path in the checkout, and a change to one of them, or a new one, runs the suite again."""
    cache = tmp_path / "cache"
    patterns = ("setup.sh", "vagrant/build-box.sh", "tests/vagrant/*")
    (checkout / "vagrant").mkdir()
    (checkout / "vagrant" / "build-box.sh").write_text("v1\n")
    (checkout / "tests" / "vagrant").mkdir(parents=True)
    (checkout / "tests" / "vagrant" / "test_up.py").write_text("v1\n")
    assert gate.decide_on_files("vagrant up", "vagrant-up", patterns, checkout, cache, env={})[0]
    stamp = gate.record_pass("vagrant-up", checkout, cache, patterns)
    assert json.loads(stamp.read_text())["files"] == ["setup.sh", "tests/vagrant/test_up.py", "vagrant/build-box.sh"]
    runs, why = gate.decide_on_files("vagrant up", "vagrant-up", patterns, checkout, cache, env={})
    assert not runs and "vagrant/build-box.sh" in why
    (checkout / "README.md").write_text("not a gated file\n")
    assert not gate.decide_on_files("vagrant up", "vagrant-up", patterns, checkout, cache, env={})[0]
    (checkout / "tests" / "vagrant" / "helper.sh").write_text("new\n")
    runs, why = gate.decide_on_files("vagrant up", "vagrant-up", patterns, checkout, cache, env={})
    assert runs and "tests/vagrant/helper.sh changed" in why
