"""A failed integration test's files come back from the micro-VM and stay on the host (tests/failed_files.py)."""
from tests import failed_files


def test_a_failed_tests_tmp_path_is_copied_beside_the_junit_xml_without_its_largest_files(tmp_path, monkeypatch):
    monkeypatch.setattr(failed_files, "MAX_FILE_BYTES", 1000)
    src = tmp_path / "tmp"
    (src / "lab6-failover" / "2026" / "raw").mkdir(parents=True)
    (src / "lab6-failover" / "2026" / "results.json").write_text("{}")
    (src / "lab6-failover" / "2026" / "raw" / "big.pcap").write_bytes(b"x" * 2000)
    shared = tmp_path / "vm1"
    dest = failed_files.keep(src, shared, "tests/integration/test_labs.py::test_lab6[a b]")
    assert dest.parent == shared / "failed" and dest.name.startswith("test_labs.py--test_lab6-a-b--")
    assert failed_files.folder_name("t.py::x[a b]") != failed_files.folder_name("t.py::x[a-b]")
    assert (dest / "lab6-failover" / "2026" / "results.json").read_text() == "{}"
    assert not (dest / "lab6-failover" / "2026" / "raw" / "big.pcap").exists()


def test_the_host_moves_every_shards_files_to_one_set_and_keeps_the_newest_sets(tmp_path):
    kept = tmp_path / "kept"
    for old in ("20261101T000000-ab12cd", "20261102T000000-ef34gh", "zz-not-a-set"):
        (kept / old).mkdir(parents=True)
    shards = [tmp_path / "vm1", tmp_path / "vm2", tmp_path / "vm3"]
    (shards[0] / "failed" / "test_a").mkdir(parents=True)
    (shards[0] / "failed" / "test_a" / "f").write_text("a")
    (shards[1] / "failed" / "test_b").mkdir(parents=True)
    shards[2].mkdir()
    target = failed_files.harvest(shards, kept, keep_sets=2)
    assert sorted(p.name for p in target.iterdir()) == ["test_a", "test_b"]
    assert (target / "test_a" / "f").read_text() == "a"
    assert sorted(p.name for p in kept.iterdir()) == sorted(["20261102T000000-ef34gh", target.name, "zz-not-a-set"])
    assert failed_files.harvest(shards, kept) is None     # nothing left to move
