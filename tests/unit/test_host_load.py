"""A VM's host CPU over one run's traffic, as the guest reads it (runners.collect.host_load) and judges it
(runners.results.fidelity): the clock offset, the wait for the row that closes the window, the warning."""
import json
import time

from runners.collect import host_load
from runners.linux import host_cpu
from runners.results.fidelity import OK, WARN, Evidence, judge


def _rows(folder, start, n, others_per_row, step=0.5):
    """n rows from `start` on the host's clock: 2 CPUs at 100 Hz (100 jiffies a row), the testbed 80."""
    with open(folder / host_cpu.SAMPLES_FILE, "a") as f:
        for i in range(n):
            f.write(json.dumps({"t": start + i * step, "busy": i * (80 + others_per_row), "steal": 0,
                                "total": i * 100, "testbed": i * 80, "cpus": 2}) + "\n")


def test_the_clock_offset_of_a_local_folder_is_nil_and_leaves_nothing(tmp_path):
    offset = host_load.clock_offset(tmp_path)
    assert abs(offset) < 0.05 and list(tmp_path.iterdir()) == []
    assert host_load.clock_offset(tmp_path / "missing") is None


def test_a_folder_without_the_hosts_rows_says_the_host_recorded_none(tmp_path):
    got, why = host_load.over_window(tmp_path, time.time() - 5, time.time() - 1, wait_s=2)
    assert got is None and "recorded no rows" in why


def test_a_recorder_that_stopped_is_not_waited_for(tmp_path):
    now = time.time()
    _rows(tmp_path, now - 30, 20, others_per_row=0)      # the last row 20.5 s ago
    t0 = time.monotonic()
    got, why = host_load.over_window(tmp_path, now - 25, now - 1, wait_s=5)
    assert got is None and "do not span" in why and time.monotonic() - t0 < 1


def test_the_window_on_the_hosts_clock_gives_the_others_share(tmp_path):
    now = time.time()
    _rows(tmp_path, now - 20, 41, others_per_row=20)     # rows until now: 0.4 CPUs of others
    got, why = host_load.over_window(tmp_path, now - 15, now - 5, wait_s=0)
    assert why is None and got["others_cores"] == 0.4 and got["testbed_cores"] == 1.6
    assert got["window"][0] <= now - 15 and got["window"][1] >= now - 5 and abs(got["clock_offset_s"]) < 0.05


def test_a_window_whose_end_came_within_a_row_of_the_hosts_last_is_not_waited_for(tmp_path):
    """Waiting for the row after the traffic's end cost each run 0.1-0.5 s in the guest: a row at most a
    sample interval before the end closes the window instead."""
    now = time.time()
    _rows(tmp_path, now - 10, 20, others_per_row=20)     # the last row 0.5 s ago
    t0 = time.monotonic()
    got, why = host_load.over_window(tmp_path, now - 5, now - 0.3, wait_s=3)
    assert why is None and got["others_cores"] == 0.4 and time.monotonic() - t0 < 1
    assert got["window"][1] < now - 0.3


def test_the_clock_offset_is_measured_once_a_minute_per_folder(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(host_load, "clock_offset", lambda folder: calls.append(folder) or 0.25)
    monkeypatch.setattr(host_load, "_offsets", {})
    assert host_load._recent_offset(tmp_path) == (0.25, 0.0)
    offset, age = host_load._recent_offset(tmp_path)
    assert offset == 0.25 and 0.0 <= age < 5 and calls == [tmp_path]
    host_load._recent_offset(tmp_path / "other")
    assert calls == [tmp_path, tmp_path / "other"]
    monkeypatch.setattr(host_load, "OFFSET_KEPT_S", 0.0)
    host_load._recent_offset(tmp_path)
    assert calls == [tmp_path, tmp_path / "other", tmp_path]


def test_a_window_the_host_has_not_closed_yet_is_waited_for_then_named(tmp_path):
    now = time.time()
    _rows(tmp_path, now - 10, 20, others_per_row=0)      # the last row 0.5 s ago: the window ends now
    t0 = time.monotonic()
    got, why = host_load.over_window(tmp_path, now - 5, now + 0.2, wait_s=0.3)
    assert got is None and "do not span" in why and time.monotonic() - t0 >= 0.3


def test_a_busy_host_warns_and_a_quiet_one_passes():
    def host(others, cpus=2):
        idle = 100 * (cpus - 1.2 - others) / cpus
        return {"seconds": 10.0, "cpus": cpus, "testbed_cores": 1.2, "others_cores": others, "steal_cores": 0.0,
                "host_idle_pct": round(idle, 1), "window": [1.0, 11.0], "clock_offset_s": 0.76}
    quiet = judge(Evidence(directions=[], paths={}, pings={}, host_cpu=host(0.3)))
    assert quiet["status"] == OK and quiet["checks"]["host_cpu"]["others_cores"] == 0.3
    busy = judge(Evidence(directions=[], paths={}, pings={}, host_cpu=host(0.9)))
    assert busy["status"] == WARN and "other processes on the VM's host used 0.9 of its 2 CPUs" in busy["reasons"][0]
    # as much used by others on a 16-core host left the emulation all the CPU it wanted
    assert judge(Evidence(directions=[], paths={}, pings={}, host_cpu=host(0.9, cpus=16)))["status"] == OK
    # the 2026-11-27 evening machine: 0.1 of 2 CPUs stolen while the host had 35-47 % idle, every run at its rate
    cloud = {**host(0.0), "steal_cores": 0.1, "host_idle_pct": 34.9}
    assert judge(Evidence(directions=[], paths={}, pings={}, host_cpu=cloud))["status"] == OK
    stolen = judge(Evidence(directions=[], paths={}, pings={}, host_cpu={**host(0.0), "steal_cores": 0.2,
                                                                         "host_idle_pct": 20.0}))
    assert stolen["status"] == WARN and stolen["reasons"] == [
        "the hypervisor under the VM's host took 0.2 of its 2 CPUs during the traffic (steal) and left 20 % idle"]
    heavy = judge(Evidence(directions=[], paths={}, pings={}, host_cpu={**cloud, "steal_cores": 0.6}))
    assert heavy["status"] == WARN and "took 0.6 of its 2 CPUs" in heavy["reasons"][0]
    missing = judge(Evidence(directions=[], paths={}, pings={}, host_cpu_note="the host's rows do not span"))
    assert missing["status"] == OK and "the host's CPU not judged: the host's rows do not span" in missing["notes"]
