"""A result set's copy of a scenario is read as the file it came from (the VM's guest and --resume read
the copy): a controller app named relative to the scenario is found beside the original."""
import json
import shutil
from types import SimpleNamespace

import pytest
from scenarios.spec.loader import ScenarioError, load_experiment

from runners.cli import parse_command_line
from runners.runset.checks import as_if_from, check_plans

SCENARIO = """\
name: own-app
topology:
  kind: switched
  server: h1
  clients: [h2]
  switches:
    - {name: s1, type: ovs, controller: true}
  controller: {app: my_app.py}
  links:
    - {name: h1a, between: [h1, s1], bw: 10}
    - {name: h2a, between: [h2, s1], bw: 10}
  paths:
    - {name: A, client_if: 0, server_if: 0}
traffic: {duration: 2}
"""


def test_the_copy_finds_the_app_beside_the_original(tmp_path):
    src = tmp_path / "mine"
    src.mkdir()
    (src / "s.yaml").write_text(SCENARIO)
    (src / "my_app.py").write_text("# an app\n")
    run_dir = tmp_path / "results" / "own-app" / "20260101T000000Z"
    run_dir.mkdir(parents=True)
    shutil.copy(src / "s.yaml", run_dir / "scenario.yaml")
    with pytest.raises(ScenarioError, match="no such file"):
        check_plans(load_experiment(run_dir / "scenario.yaml"))     # what the guest did before
    exp = as_if_from(load_experiment(run_dir / "scenario.yaml"), str(src / "s.yaml"))
    check_plans(exp)
    assert exp.file == str(src / "s.yaml")


def test_the_guest_and_the_shell_take_the_original_file(tmp_path):
    from runners.backends.vm.guest import job_of, read_job
    from runners.cli.run import build_parser
    from runners.runset.options import RunOptions

    args = build_parser().parse_args(["/x/s.yaml"])
    args.capture_spec, args.argv, args.started_at, args.process_age = None, [], 0.0, 0.0
    job = tmp_path / "guest-job.json"
    job.write_text(json.dumps(job_of(RunOptions.from_args(args), SimpleNamespace(file="/x/s.yaml"), tmp_path)))
    assert read_job(job, str(tmp_path / "scenario.yaml"), [], 0.0, 0.0).scenario_file == "/x/s.yaml"
    _, args = parse_command_line(["shell", "r/scenario.yaml", "--scenario-file", "/x/s.yaml"])
    assert args.scenario_file == "/x/s.yaml"
    assert as_if_from("unchanged", None) == "unchanged"
