"""report.html as a person sees it: opened in headless Chromium, every figure must have loaded, and
the screenshot must show the page. report.md links the same figures."""
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image

from runners.analysis.report import make_report

from .test_experiments import fake_result_set


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "headless Chromium is needed to check report.html: run ./setup.sh (it installs chromium)"
    return path


def browse(*args: str) -> subprocess.CompletedProcess:
    # as root Chromium needs --no-sandbox; a fresh profile dir keeps runs independent
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args], capture_output=True, text=True, timeout=120)


def test_the_html_report_shows_every_figure_in_a_browser(tmp_path):
    d = fake_result_set(tmp_path, "set", {"p001", "p002"})
    make_report(d)
    page = (d / "report.html").read_text()
    figures = page.count("<img ")
    assert figures >= 5 and 'src="data:image/png;base64,' in page and "src=\"plots/" not in page
    # the same page with a probe: after load, the title says how many images really decoded
    probe = page.replace("</body>", "<script>window.addEventListener('load', () => { document.title = "
                                    "'decoded ' + [...document.images].filter(i => i.complete && "
                                    "i.naturalWidth > 0).length; });</script></body>")
    (tmp_path / "probe.html").write_text(probe)
    dom = browse(f"--user-data-dir={tmp_path / 'profile1'}", "--dump-dom", (tmp_path / "probe.html").as_uri())
    assert re.search(r"<title>decoded (\d+)</title>", dom.stdout).group(1) == str(figures), dom.stderr[-500:]

    shot = tmp_path / "report.png"
    browse(f"--user-data-dir={tmp_path / 'profile2'}", f"--screenshot={shot}", "--window-size=1280,2400",
           (d / "report.html").as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (2400, 1280)
    ink = (pixels[..., :3].mean(axis=2) < 0.9).mean()     # share of pixels that are not (near) white
    assert 0.03 < ink < 0.6, ink                          # text, tables and figures: neither blank nor a block


def test_the_markdown_report_links_the_figures_beside_it(tmp_path):
    d = fake_result_set(tmp_path, "set", {"p001"})
    make_report(d)
    md = (d / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links and all((d / link).is_file() for link in links)
    assert "## Runs" in md and "## Scenario" in md and "| run | point |" in md
