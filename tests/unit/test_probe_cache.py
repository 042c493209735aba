"""The probe's answers kept across cold VM boots: asked once per process, handed to a guest only when they
were asked under the same kernel build, programs and modules, written back only by a guest that asked."""
from __future__ import annotations

import json
import time

import pytest

from runners.backends import probe_cache


@pytest.fixture(autouse=True)
def fresh_answers(monkeypatch):
    monkeypatch.setattr(probe_cache, "_values", {})
    monkeypatch.setattr(probe_cache, "_asked", set())
    monkeypatch.setattr(probe_cache, "_writes_back", {"on": True})
    monkeypatch.setattr(probe_cache, "guest_key", lambda: "this-machine")


def _functions():
    calls = []

    @probe_cache.remembered
    def netem_works(under_tbf=False):
        calls.append(("netem", under_tbf))
        return True, ""

    @probe_cache.remembered
    def endpoint_answers():
        calls.append("endpoints")
        return {"signal": (True, ""), "laminar": (False, "Error: unknown flag")}
    return calls, netem_works, endpoint_answers


def test_an_answer_is_asked_once_per_arguments():
    calls, netem_works, _ = _functions()
    assert netem_works() == netem_works(False) == (True, "")   # defaults filled in: one answer
    netem_works(True)
    assert calls == [("netem", False), ("netem", True)]
    netem_works.cache_clear()
    netem_works()
    assert calls == [("netem", False), ("netem", True), ("netem", False)]


def test_a_guest_that_asked_writes_its_answers_back_and_the_next_guest_takes_them(tmp_path, monkeypatch):
    calls, netem_works, endpoint_answers = _functions()
    netem_works()
    endpoint_answers()
    answers = tmp_path / probe_cache.ANSWERS_FILE
    assert probe_cache.keep_new(answers)
    doc = json.loads(answers.read_text())
    assert doc["key"] == "this-machine" and len(doc["answers"]) == 2
    # the next boot: a new process, the same machine
    monkeypatch.setattr(probe_cache, "_values", {})
    monkeypatch.setattr(probe_cache, "_asked", set())
    assert probe_cache.seed_from(answers) == 2
    calls.clear()
    assert netem_works() == (True, "")                      # the tuple its function returns, not JSON's list
    assert endpoint_answers()["laminar"] == (False, "Error: unknown flag")
    assert calls == [] and not probe_cache.keep_new(tmp_path / "again.json")   # asked nothing: nothing written
    assert netem_works(True) and calls == [("netem", True)]   # an answer the file did not hold is asked


def test_answers_asked_under_another_kernel_or_programs_are_not_taken(tmp_path, monkeypatch):
    answers = tmp_path / probe_cache.ANSWERS_FILE
    answers.write_text(json.dumps({"key": "another-build", "answers": [["netem_works", [], [False, "no"]]]}))
    calls, netem_works, _ = _functions()
    assert probe_cache.seed_from(answers) == 0
    assert netem_works() == (True, "") and calls == [("netem", False)]
    for text in ("not json", "[]", json.dumps({"key": "this-machine", "answers": [["netem_works"]]})):
        answers.write_text(text)
        assert probe_cache.seed_from(answers) == 0
    assert probe_cache.seed_from(tmp_path / "missing.json") == 0


def test_the_key_changes_with_the_kernel_build_a_program_and_the_asking_code(monkeypatch, tmp_path):
    monkeypatch.undo()   # the real guest_key
    code = tmp_path / "probe.py"
    code.write_text("# one version of the asking code\n")
    monkeypatch.setattr(probe_cache, "ASKING_CODE", (code,))
    first = probe_cache.guest_key()
    assert first == probe_cache.guest_key()
    code.write_text("# another version of the asking code\n")
    second = probe_cache.guest_key()
    assert second != first
    tool = tmp_path / "iperf3"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    third = probe_cache.guest_key()
    assert third != second      # another iperf3 first on the PATH
    monkeypatch.setattr(probe_cache, "kernel_build", lambda: "Linux version 6.1.0-57-amd64 ... #1 SMP")
    assert probe_cache.guest_key() != third


def test_only_what_the_kernel_and_programs_answered_is_kept(tmp_path):
    """A probe that could not ask (its namespace not made, in a guest short of memory) must not refuse every
    later boot of that kernel: it is asked again."""
    @probe_cache.remembered
    def netem_works(under_tbf=False):
        return False, "cannot create a network namespace: Cannot allocate memory"

    @probe_cache.remembered
    def endpoint_answers():
        return {"signal": (False, probe_cache.NO_NAMESPACE + ": ip failed")}

    @probe_cache.remembered
    def kernel_debug():
        return ["kmemleak"]
    netem_works(), endpoint_answers(), kernel_debug()
    answers = tmp_path / probe_cache.ANSWERS_FILE
    assert probe_cache.keep_new(answers)
    assert [a[0] for a in json.loads(answers.read_text())["answers"]] == ["kernel_debug"]
    assert probe_cache.worth_keeping("endpoint_answers", {"laminar": (False, "Error: unknown flag")})
    assert not probe_cache.worth_keeping("iperf3_facts", {"iperf3": None})
    # a file that holds a failure anyway (written by an older version) is not taken for it
    answers.write_text(json.dumps({"key": "this-machine", "answers": [["netem_works", [False], [False, "no"]]]}))
    assert probe_cache.seed_from(answers) == 0

def test_a_warm_vms_jobs_write_nothing_back(tmp_path):
    _, netem_works, _ = _functions()
    netem_works()
    probe_cache.settle()
    netem_works(True)
    assert not probe_cache.keep_new(tmp_path / probe_cache.ANSWERS_FILE)
    assert not (tmp_path / probe_cache.ANSWERS_FILE).exists()


def test_the_host_offers_what_it_kept_for_the_image_and_adopts_what_the_guest_asked(tmp_path):
    image, cache, run_dir = tmp_path / "vmlinuz", tmp_path / "cache", tmp_path / "set"
    image.write_bytes(b"a kernel")
    run_dir.mkdir()
    assert not probe_cache.offer(image, run_dir, cache)          # nothing kept yet
    assert not (run_dir / probe_cache.ANSWERS_FILE).exists()
    guest = {"key": "k", "answers": [["kernel_debug", [], None]]}
    (run_dir / probe_cache.ANSWERS_FILE).write_text(json.dumps(guest))
    assert probe_cache.adopt(image, run_dir, cache)
    assert not (run_dir / probe_cache.ANSWERS_FILE).exists()      # the result set keeps no trace of it
    assert probe_cache.offer(image, run_dir, cache)
    assert json.loads((run_dir / probe_cache.ANSWERS_FILE).read_text()) == guest
    other = tmp_path / "vmlinuz-other"
    other.write_bytes(b"another kernel")
    assert not probe_cache.offer(other, tmp_path, cache)         # kept per image
    (run_dir / probe_cache.ANSWERS_FILE).write_text("cut sho")
    (run_dir / f".{probe_cache.ANSWERS_FILE}.x1y2z3").write_text("a write the guest did not finish")
    assert not probe_cache.adopt(image, run_dir, cache)
    assert sorted(p.name for p in run_dir.iterdir()) == []        # nothing of it left in the set
    assert probe_cache.offer(image, run_dir, cache)               # the good answers were kept


def test_the_host_keeps_the_answers_of_the_images_used_last(tmp_path, monkeypatch):
    monkeypatch.setattr(probe_cache, "KEPT_IMAGES", 2)
    cache, run_dir = tmp_path / "cache", tmp_path / "set"
    run_dir.mkdir()
    for i in range(4):
        image = tmp_path / f"vmlinuz-{i}"
        image.write_bytes(f"kernel {i}".encode())
        (run_dir / probe_cache.ANSWERS_FILE).write_text(json.dumps({"key": "k", "answers": []}))
        assert probe_cache.adopt(image, run_dir, cache)
        time.sleep(0.02)    # mtimes apart
    assert len(list(cache.glob("*.json"))) == 2