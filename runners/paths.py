"""Where the checkout is: the VM backend shares it with the guest, and results/ lives in it."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "results"
