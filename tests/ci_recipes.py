"""docs/ci.md's two recipes as the tests read them: the GitHub Actions workflow and the Slurm script with its merge.

The Slurm test (tests/cluster) submits the script from here, with only the scenario and the shard count
swapped, and the unit test (tests/unit/test_ci_recipes.py) checks that the workflow runs the same commands;
so neither can drift from what the docs show.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "ci.md"
SCENARIO = re.compile(r"scenarios/[\w.-]+\.ya?ml")
ARRAY = re.compile(r"^#SBATCH --array=1-(\d+)$", re.M)
# How each engine spells the shard's number K and the shard count N; the normal form says K and N
SLURM_K = ("${SLURM_ARRAY_TASK_ID}", "$SLURM_ARRAY_TASK_ID")
SLURM_N = ("${SLURM_ARRAY_TASK_COUNT}", "$SLURM_ARRAY_TASK_COUNT")
GITHUB_K = ("${{ matrix.shard }}",)


class RecipeError(AssertionError):
    """docs/ci.md does not hold a recipe in the shape the tests read (named with the section)."""


def fenced(section: str, lang: str, text: str | None = None) -> list[str]:
    """The ```lang blocks of the `### section` of docs/ci.md, in order."""
    text = DOC.read_text() if text is None else text
    parts = re.split(r"^#{2,3} ", text, flags=re.M)
    body = next((p for p in parts if p.split("\n", 1)[0].strip() == section), None)
    if body is None:
        raise RecipeError(f"{DOC}: no section '### {section}'")
    return re.findall(rf"^```{lang}\n(.*?)^```$", body, flags=re.M | re.S)


def workflow(text: str | None = None) -> str:
    blocks = fenced("GitHub Actions", "yaml", text)
    if len(blocks) != 1:
        raise RecipeError(f"{DOC}: '### GitHub Actions' should hold one yaml block, not {len(blocks)}")
    return blocks[0]


def slurm(text: str | None = None) -> tuple[str, str]:
    """(the sbatch script, the merge command run when its tasks have ended)."""
    blocks = fenced("Slurm", "sh", text)
    if len(blocks) != 2:
        raise RecipeError(f"{DOC}: '### Slurm' should hold two sh blocks (the script, the merge), not {len(blocks)}")
    merge = [ln for ln in blocks[1].splitlines() if ln.strip() and not ln.startswith("#")]
    if len(merge) != 1:
        raise RecipeError(f"{DOC}: the Slurm merge block should be one command, not {merge}")
    return blocks[0], merge[0]


def swapped(script: str, scenario: str, shards: int) -> str:
    """The script with its two parts to change replaced: the scenario file and the N of --array=1-N."""
    if len(SCENARIO.findall(script)) != 1 or len(ARRAY.findall(script)) != 1:
        raise RecipeError(f"{DOC}: the Slurm script should name one scenario file and one '#SBATCH --array=1-N', "
                          f"as the parts to change:\n{script}")
    return ARRAY.sub(f"#SBATCH --array=1-{shards}", SCENARIO.sub(scenario, script))


def run_lines(script: str) -> list[str]:
    """The lines of a script or a workflow step that run run-scenario."""
    return [ln.strip() for ln in script.splitlines() if "bin/run-scenario" in ln and not ln.lstrip().startswith("#")]


def normal(command: str, k: tuple[str, ...], n: tuple[str, ...]) -> list[str]:
    """A command as an argument list, its shard number spelled K and its count N, and `sudo` left out: GitHub's
    runners need it for root and Slurm runs a task as the user who submitted it (docs/ci.md says why)."""
    for spelling in k:
        command = command.replace(spelling, "K")
    for spelling in n:
        command = command.replace(f"K/{spelling}", "K/N")
    argv = shlex.split(command.replace("${{", "{{"))   # shlex keeps {{ }}; a leftover expression stays visible
    return argv[1:] if argv[:1] == ["sudo"] else argv
