"""The mover of a warm VM's results (runners.backends.vm.spool_out): a set the guest writes into a stage
arrives in the result folder run by run, whole, the same as if it had been written there directly, and a
host that dies mid-move loses no finished run."""
import json
import os
from pathlib import Path

import pytest

from runners.backends.vm import spool_out
from runners.backends.vm.spool_out import Stage, salvage, stages_for
from runners.results.store import ResultStore


def a_run(i: int) -> dict:
    return {"id": f"r{i:03d}-mptcp-A", "point": "p001", "repeat": i, "primary": "A", "mode": "mptcp", "status": "ok",
            "metrics": {"throughput_mbps": 18.0 + i, "seconds": 20.0}}


def write_run(store: ResultStore, i: int) -> None:
    """As the guest's runner records a run: its raw files, then results.json (ResultStore.add_run)."""
    run = a_run(i)
    store.raw_dir(run["id"])
    store.save_raw(run["id"], "iperf3-client.json", json.dumps({"end": {"sum": i}}) * 50)
    store.save_raw(run["id"], "ping-A.txt", "64 bytes from 10.0.1.2: icmp_seq=1 ttl=64 time=10.2 ms\n" * i)
    (store.dir / "raw" / run["id"] / "pcap").mkdir(exist_ok=True)
    (store.dir / "raw" / run["id"] / "pcap" / "h1-eth0.part.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" * 100)
    (store.dir / "raw" / run["id"] / "pcap" / "h1-eth0.part.pcap").rename(
        store.dir / "raw" / run["id"] / "pcap" / "h1-eth0.pcap")
    with open(store.dir / "commands.log", "a") as log:
        log.write(f"[h1] iperf3 -c 10.0.2.2 -t 20 # run {i}\n")
    store.add_run(run)


def start_set(folder: Path) -> ResultStore:
    """What the host writes before its guest starts, and the guest's own start."""
    store = ResultStore(folder, links_latest=False)
    store.write_scenario("name: two-paths\n")
    store.set_metadata(command_line="run-scenario two-paths.yaml --out /tmp/x")
    (folder / "guest-job.json").write_text(json.dumps({"version": 1, "run_dir": str(folder)}) + "\n")
    return store


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def consistent(target: Path) -> list[str]:
    """Every run the target's results.json lists, with its raw files there; no half-written file under
    its own name. The runs it lists."""
    doc = json.loads((target / "results.json").read_text())
    for run in doc["runs"]:
        raw = target / "raw" / run["id"]
        assert (raw / "iperf3-client.json").read_text() == json.dumps({"end": {"sum": run["repeat"]}}) * 50
        assert (raw / "pcap" / "h1-eth0.pcap").read_bytes() == b"\xd4\xc3\xb2\xa1" * 100
    return [r["id"] for r in doc["runs"]]


@pytest.fixture
def staged(tmp_path):
    """A result folder the warm VM does not share, its stage in the spool, and the guest's writer there."""
    target = tmp_path / "out" / "two-paths" / "20261125T220000Z"
    start_set(target)
    stage = Stage.create(tmp_path / "spool" / "stages", "1764108000.000000-42", target)
    stage.seed()
    return target, stage, ResultStore(stage.files, links_latest=False)


def test_each_run_arrives_whole_and_the_finished_set_is_the_one_written_directly(tmp_path, staged):
    target, stage, guest = staged
    direct = tmp_path / "direct"
    here = start_set(direct)
    guest.metadata = dict(here.metadata)
    (target / "run.log").write_text("the host's own log\n")    # written by the host while the guest runs
    for i in (1, 2, 3):
        write_run(guest, i)
        write_run(here, i)
        stage.poll()
        assert consistent(target) == [a_run(k)["id"] for k in range(1, i + 1)]
    guest.finish_metadata(status="ok")
    here.finish_metadata(status="ok")
    for store in (guest, here):
        store.flush_raw()   # each run's run.json goes with the next flush: the set's end
    stage.finish()
    moved, written = files(target), files(direct)
    assert moved.pop("run.log") == b"the host's own log\n"
    assert moved.pop("guest-job.json") != written.pop("guest-job.json")   # each names its own folder
    assert sorted(moved) == sorted(written) and moved == written
    assert json.loads(moved["results.json"]) == json.loads(written["results.json"])
    assert not stage.home.exists()


def test_a_host_that_dies_mid_move_leaves_every_listed_run_whole_and_salvage_moves_the_rest(
        tmp_path, staged, monkeypatch):
    target, stage, guest = staged
    write_run(guest, 1)
    stage.poll()
    write_run(guest, 2)
    write_run(guest, 3)
    real, calls = spool_out._atomic_write, []

    def dies_after_three(snap, dst):
        calls.append(dst)
        if len(calls) > 3:
            raise KeyboardInterrupt("the host dies here")
        real(snap, dst)
    monkeypatch.setattr(spool_out, "_atomic_write", dies_after_three)
    with pytest.raises(KeyboardInterrupt):
        stage.poll()
    monkeypatch.setattr(spool_out, "_atomic_write", real)
    assert consistent(target) == [a_run(1)["id"]]      # run 2's files half moved: results.json not yet
    assert not [p for p in target.rglob(".*moving")]   # no temporary file left under the target
    # the next host (a --resume of the folder, or the warm VM's stop) finishes it from the stage
    assert [s.home for s in stages_for(tmp_path / "spool" / "stages", target)] == [stage.home]
    assert salvage(tmp_path / "spool" / "stages", log=lambda m: None) == [target]
    assert consistent(target) == [a_run(k)["id"] for k in (1, 2, 3)]
    assert not (tmp_path / "spool" / "stages" / stage.home.name).exists()


def test_a_resumed_set_starts_from_its_finished_runs(tmp_path):
    target = tmp_path / "out" / "set"
    store = start_set(target)
    write_run(store, 1)
    (target / "run.log").write_text("first attempt\n")
    stage = Stage.create(tmp_path / "stages", "job", target)
    stage.seed()
    assert consistent(stage.files) == [a_run(1)["id"]] and not (stage.files / "run.log").exists()
    guest = ResultStore(stage.files, links_latest=False)
    guest.runs = json.loads((stage.files / "results.json").read_text())["runs"]
    write_run(guest, 2)
    stage.finish()
    assert consistent(target) == [a_run(1)["id"], a_run(2)["id"]]
    assert (target / "run.log").read_text() == "first attempt\n"


def test_what_the_guest_removes_after_it_was_moved_goes_too(staged):
    target, stage, guest = staged
    (stage.files / "probe.tmp").write_text("x")
    stage.sync()
    assert (target / "probe.tmp").exists()
    (stage.files / "probe.tmp").unlink()
    (stage.files / ".space-reserve").write_bytes(b"\0" * 64)   # a dot file is the writer's own: never moved
    stage.finish()
    assert not (target / "probe.tmp").exists() and not (target / ".space-reserve").exists()


def test_a_moved_file_keeps_its_mode_and_time(staged):
    target, stage, _ = staged
    f = stage.files / "plots.png"
    f.write_bytes(b"png")
    os.chmod(f, 0o640)
    os.utime(f, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    stage.finish()
    st = (target / "plots.png").stat()
    assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o640, 1_700_000_000_000_000_000)


def test_salvage_drops_a_stage_whose_folder_is_gone(tmp_path):
    stage = Stage.create(tmp_path / "stages", "job", tmp_path / "deleted-since")
    assert salvage(tmp_path / "stages", log=lambda m: None) == []
    assert not stage.home.exists()


def test_a_folder_that_cannot_take_the_results_is_said_once_and_the_stage_kept(staged, capsys, monkeypatch):
    import errno

    from runners.backends.vm.host import _Mover

    target, stage, guest = staged
    mover = _Mover(stage)

    def full(snap, dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(spool_out, "_atomic_write", full)     # the result folder's disk is full
    write_run(guest, 1)
    mover.poll()
    write_run(guest, 2)
    mover.poll()
    mover.finish()
    said = capsys.readouterr().err
    assert mover.failed and said.count("cannot be moved into") == 1 and f"kept in {stage.files}" in said
    assert "No space left on device" in said
    assert consistent(stage.files) == [a_run(1)["id"], a_run(2)["id"]]     # nothing lost: the stage stays


def test_a_warm_vm_that_died_mid_job_was_salvaged_and_the_mover_finishes_quietly(staged, capsys):
    """The warm VM's process gone during a job: the host stops it, and stopping salvages every stage into its
    folder and removes the stages. The job's mover then finds its stage gone: nothing to move, no traceback
    (one read the gone stage's `target` file)."""
    from runners.backends.vm.host import _Mover

    target, stage, guest = staged
    mover = _Mover(stage)
    write_run(guest, 1)
    mover.poll()
    write_run(guest, 2)
    assert salvage(stage.home.parent, log=lambda m: None) and not stage.home.exists()
    mover.finish()
    assert not mover.failed and capsys.readouterr().err == ""
    assert consistent(target) == [a_run(1)["id"], a_run(2)["id"]]
