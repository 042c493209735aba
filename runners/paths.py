"""Where the checkout is: the VM backend shares it with the guest, and results/ lives in it.

Installed without -e (`pip install .`), the code sits in site-packages, which is no checkout: results do
not belong there, so they go to results/ in the working folder, and there is no git revision to record.
"""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IN_CHECKOUT = (REPO / "setup.py").is_file()
RESULTS = REPO / "results" if IN_CHECKOUT else Path.cwd() / "results"


def user_cache(env=os.environ) -> Path:
    """This user's testbed cache: $XDG_CACHE_HOME/mptcp-testbed (default ~/.cache/mptcp-testbed), where the
    decompressed kernels, the probe's kept answers and the calibrations go, each in a folder of its own."""
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "mptcp-testbed"
