"""The README, CI entry point, setup script and Vagrantfile stay true to each other, and the package
installs: every module and data file, editable (setup.sh) or not."""
import json
import re
import shutil
import subprocess
import sysconfig
import venv
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


# Top-level packages of the checkout that are its tools, not the testbed: setup.py leaves them out.
NOT_INSTALLED = ("tests", "bench")

# Run by the scratch venv's Python outside the checkout: every module of each installed top-level
# package, found by walking the installed packages, imported; and where paths.py puts the results.
IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
found = {}
for top in sys.argv[1:]:
    pkg = importlib.import_module(top)
    found[top] = pkg.__file__
    for info in pkgutil.walk_packages(pkg.__path__, top + "."):
        found[info.name] = importlib.import_module(info.name).__file__
from runners import paths
print(json.dumps({"modules": found, "in_checkout": paths.IN_CHECKOUT, "results": str(paths.RESULTS)}))
"""


def _copy_of_the_checkout(dest: Path) -> Path:
    """The checkout as a developer has it (tracked files, and new ones git does not ignore): pip builds
    inside the source folder (build/, *.egg-info), which must not be the checkout itself."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, names):
        if (REPO / name).is_file():   # not a tracked file deleted in the work tree
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def _what_must_be_installed(src: Path) -> tuple[list[str], set[str], set[str]]:
    """The top-level packages, every module under them, and every other file under them (package data)."""
    tops = sorted(p.name for p in src.iterdir() if (p / "__init__.py").is_file() and p.name not in NOT_INSTALLED)
    modules, data = set(), set()
    for top in tops:
        for f in (src / top).rglob("*"):
            rel = f.relative_to(src)
            if f.is_file() and f.suffix == ".py":
                parts = rel.with_suffix("").parts
                modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
            elif f.is_file():
                data.add(rel.as_posix())
    return tops, modules, data


def _scratch_venv(where: Path) -> Path:
    """A venv without pip that sees the distribution's packages (Mininet, os-ken) and, through a path
    line, this venv's (pydantic, PyYAML, pip, setuptools...): not its .pth files, so not the checkout's
    own editable install."""
    venv.create(where, system_site_packages=True, with_pip=False)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "testbed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _pip_install(python: Path, *args: str) -> subprocess.CompletedProcess:
    """Offline and quick: no dependencies, no index, and the build backend from what is installed."""
    r = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
                        "--disable-pip-version-check", "--no-cache-dir", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_pyproject_names_the_build_backend():
    """pip builds through setuptools' PEP 517 backend: its editable install (PEP 660) instead of
    `setup.py develop`, which pip 25.3 no longer runs."""
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^build-backend = "setuptools\.build_meta"$', text, re.M)
    assert re.search(r'^requires = \["setuptools>=(6[4-9]|[7-9][0-9])', text, re.M)


def test_a_non_editable_install_has_every_module_and_data_file(tmp_path):
    """A wheel of the checkout, installed in a scratch venv, and run from elsewhere: each module of
    runners, scenarios, topologies and controller imports from site-packages (a package setup.py
    leaves out fails here), the scenarios ship, and results go to the working folder."""
    src = _copy_of_the_checkout(tmp_path / "src")
    tops, modules, data = _what_must_be_installed(src)
    assert {"runners", "scenarios", "topologies", "controller"} <= set(tops)
    python = _scratch_venv(tmp_path / "venv")
    _pip_install(python, str(src))
    work = (tmp_path / "elsewhere").resolve()
    work.mkdir()
    r = subprocess.run([str(python), "-c", IMPORT_EVERYTHING, *tops], cwd=work, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert sorted(modules - set(got["modules"])) == [], "not installed"
    assert [m for m, f in got["modules"].items() if not Path(f).is_relative_to(site)] == [], "imported from elsewhere"
    assert sorted(d for d in data if not (site / d).is_file()) == [], "package data not installed"
    assert got["in_checkout"] is False and got["results"] == str(work / "results")
    listed = subprocess.run([str(python.parent / "run-scenario"), "list"], cwd=work, capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0 and "two-paths.yaml" in listed.stdout, listed.stdout + listed.stderr


def test_the_editable_install_takes_the_pep_660_path(tmp_path):
    """setup.sh's `pip install -e`: built by the backend pyproject.toml names, not `setup.py develop`;
    run-scenario then runs the checkout's code."""
    src = _copy_of_the_checkout(tmp_path / "src").resolve()
    python = _scratch_venv(tmp_path / "venv")
    r = _pip_install(python, "-e", str(src))
    assert "setup.py develop" not in r.stdout + r.stderr and "DEPRECATION" not in r.stdout + r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    where = subprocess.run([str(python), "-c", "import runners.cli, runners.paths as p; print(runners.cli.__file__);"
                            "print(p.IN_CHECKOUT, p.RESULTS)"], cwd=work, capture_output=True, text=True, timeout=60)
    assert where.stdout.split() == [str(src / "runners" / "cli" / "__init__.py"), "True", str(src / "results")], where.stderr
    helped = subprocess.run([str(python.parent / "run-scenario"), "--help"], cwd=work, capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0 and "exit codes:" in helped.stdout, helped.stderr


def test_requirements_pin_what_debian_13s_os_ken_stack_requires_but_debian_does_not_ship():
    """Trixie's oslo.utils and oslo.serialization (pulled in by python3-os-ken 3.0.1) declare
    `tzdata>=2022.4`, a Python distribution that no Debian 13 package provides: without it in the venv,
    setup.sh's pip install printed `ERROR:` lines about the conflict (issue 32). requirements.txt pins it,
    at a version that meets every such requirement (harmless on Debian 12, whose oslo needs none)."""
    from packaging.requirements import Requirement

    recorded = json.loads((REPO / "tests" / "fixtures" / "debian13-os-ken-requires.json").read_text())
    pins = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    for package, requires in recorded["requires"].items():
        for text in requires:
            req = Requirement(text)
            pinned = pins.get(req.name.lower())
            assert pinned is not None, f"{package} requires {text}: requirements.txt does not pin {req.name}"
            assert req.specifier.contains(pinned), f"{package} requires {text}: requirements.txt pins {pinned}"
