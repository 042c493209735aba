"""The README, CI entry point, setup script and Vagrantfile stay true to each other."""
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_readme_starts_with_exactly_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "run-scenario scenarios/two-paths.yaml" in cmds[0]
    assert cmds[0].startswith("./setup.sh") and cmds[1].startswith("./setup.sh")


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert readme_commands()[1] in ci.splitlines()


def test_vagrant_provisions_with_setup_sh():
    vf = (REPO / "Vagrantfile").read_text()
    assert "/vagrant/setup.sh" in vf and "config.vm.box" in vf


def test_vagrantfile_validates():
    vagrant = shutil.which("vagrant")
    assert vagrant, "vagrant is missing: setup.sh installs it"
    r = subprocess.run([vagrant, "validate", "--ignore-provider"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_setup_sh_is_valid_bash_and_documents_itself():
    assert subprocess.run(["bash", "-n", str(REPO / "setup.sh")]).returncode == 0
    out = subprocess.run([str(REPO / "setup.sh"), "--help"], capture_output=True, text=True).stdout
    assert "--no-vm" in out


def test_requirements_are_pinned():
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.match(r"^[A-Za-z0-9_.-]+==[\w.]+$", line), line


def test_docs_do_not_point_to_the_developers_shared_folder():
    """Users do not have ../shared/: the papers are cited by title and venue."""
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "results" / "README.md",
                *(REPO / "labs").rglob("*.md")]:
        if doc.exists():
            assert "../shared" not in doc.read_text(), doc


def test_vagrant_state_is_not_tracked():
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", ".vagrant"], capture_output=True, text=True)
    assert tracked.stdout.strip() == ""


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_in_readme_and_docs_resolves():
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "results" / "README.md",
             *(REPO / "labs").rglob("*.md")]
    assert len(pages) >= 20
    broken = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
                if anchor not in headings:
                    broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_stays_a_quick_start():
    """The README keeps the two commands, what you see, and a tour; the reference lives in docs/."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 200
    for page in ("scenario-format", "backends", "results-and-metrics", "experiments", "ci", "benchmark",
                 "controller"):
        assert f"(docs/{page}.md)" in text, page


def test_kernel_reproducers_parse_and_are_linked_from_the_kernels_page():
    """docs/repro/*.sh run as root in a VM by hand (docs/kernels.md shows how): here at least they parse,
    take no argument they do not know, and the page that explains them links each."""
    scripts = sorted((REPO / "docs" / "repro").glob("*.sh"))
    assert scripts
    page = (REPO / "docs" / "kernels.md").read_text()
    for script in scripts:
        assert subprocess.run(["sh", "-n", str(script)]).returncode == 0, script
        assert f"repro/{script.name}" in page, script.name
        bad = subprocess.run(["sh", str(script), "--no-such-mode"], capture_output=True, text=True)
        assert bad.returncode == 2 and "usage" in bad.stderr, bad
