"""docs/ci.md's recipes: the GitHub Actions workflow is a valid workflow, and it runs the very commands the
Slurm recipe runs (which tests/cluster submits to a real Slurm), up to how each spells the shard.

actionlint is not in Debian 12 and its PyPI wrapper downloads the binary from GitHub while it builds, so
the workflow is checked against GitHub's workflow schema instead (SchemaStore's, as check-jsonschema from
PyPI ships it), plus the cross-references a schema cannot see.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from tests import ci_recipes

GITHUB_EXPR = re.compile(r"\$\{\{\s*matrix\.(\w+)\s*\}\}")


def jobs() -> dict:
    return yaml.safe_load(ci_recipes.workflow())["jobs"]


def test_the_workflow_is_valid_against_githubs_workflow_schema(tmp_path):
    wf = tmp_path / "sweep.yml"
    wf.write_text(ci_recipes.workflow())
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                        str(wf)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr + "(./setup.sh installs check-jsonschema, from requirements.txt)"
    # the same check refuses a broken one: a job without runs-on
    wf.write_text(ci_recipes.workflow().replace("runs-on:", "runs_on:", 1))
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                        str(wf)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "'runs-on' is a required property" in r.stdout, r.stdout + r.stderr


def test_the_workflows_references_hold():
    """What actionlint would also see: `needs` names a job, every matrix expression a key of its job's matrix,
    the shard count in K/N is the matrix's length, and each shard uploads under its own name."""
    got = jobs()
    for name, job in got.items():
        needs = job.get("needs", [])
        assert set([needs] if isinstance(needs, str) else needs) <= set(got), name
        matrix = (job.get("strategy") or {}).get("matrix") or {}
        used = set(GITHUB_EXPR.findall(yaml.safe_dump(job)))
        assert used <= set(matrix), f"job {name} uses matrix.{used - set(matrix)} that its matrix lacks"
    shards = got["sweep"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1))
    (line,) = [s["run"] for s in got["sweep"]["steps"] if "--shard" in s.get("run", "")]
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)} " in line
    upload = next(s for s in got["sweep"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert "${{ matrix.shard }}" in upload["with"]["name"]


def test_github_actions_and_slurm_run_the_same_commands_up_to_the_shard():
    got = jobs()
    count = len(got["sweep"]["strategy"]["matrix"]["shard"])
    github = [ci_recipes.normal(step["run"], ci_recipes.GITHUB_K, (str(count),))
              for job in got.values() for step in job["steps"] if "bin/run-scenario" in step.get("run", "")]
    script, merge = ci_recipes.slurm()
    slurm = [ci_recipes.normal(line, ci_recipes.SLURM_K, ci_recipes.SLURM_N)
             for line in ci_recipes.run_lines(script) + [merge]]
    assert github == slurm
    shard, merged = slurm
    assert shard[0] == ".venv/bin/run-scenario" and "--shard" in shard and shard[shard.index("--shard") + 1] == "K/N"
    assert merged[:2] == [".venv/bin/run-scenario", "merge"]


def test_the_slurm_script_names_its_two_parts_to_change_and_parses(tmp_path):
    script, _ = ci_recipes.slurm()
    assert "the scenario" in script and "the shard count" in script   # said where one edits them
    new = ci_recipes.swapped(script, "scenarios/other.yaml", 3)
    assert "#SBATCH --array=1-3\n" in new and "scenarios/other.yaml" in new and "e4-primary-path" not in new
    # every #SBATCH line before the first command, or sbatch ignores it
    lines = [ln for ln in script.splitlines() if ln.strip()]
    first_command = next(i for i, ln in enumerate(lines) if not ln.startswith("#"))
    assert all(i < first_command for i, ln in enumerate(lines) if ln.startswith("#SBATCH"))
    (tmp_path / "shards.sh").write_text(new)
    assert subprocess.run(["bash", "-n", str(tmp_path / "shards.sh")]).returncode == 0


def test_a_recipe_that_lost_a_part_to_change_is_named():
    script, _ = ci_recipes.slurm()
    with pytest.raises(ci_recipes.RecipeError, match="one '#SBATCH --array=1-N'"):
        ci_recipes.swapped(script.replace("#SBATCH --array=1-8", "#SBATCH --array=1-8%2"), "scenarios/x.yaml", 2)
    with pytest.raises(ci_recipes.RecipeError, match="no section '### Slurm'"):
        ci_recipes.slurm("# CI\n\n### GitHub Actions\n")
