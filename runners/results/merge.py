"""Combine result sets of one scenario (the shards of a sweep, or runs on several machines)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from runners.results.store import ResultStore, load_results, new_run_dir, point_latest, run_key


# A merged set whose every input ended "ok": whole, as one machine's would be (the JUnit counts it as ok).
MERGED = "merged"


class MergeError(ValueError):
    """The sets cannot be merged (different scenarios, missing files); exit 2."""


def merge(dirs: list[Path], out_base: Path) -> Path:
    texts = []
    for d in dirs:
        if not (d / "results.json").exists() or not (d / "scenario.yaml").exists():
            raise MergeError(f"{d}: not a result set (needs results.json and scenario.yaml)")
        texts.append((d / "scenario.yaml").read_text())
    if len(set(texts)) != 1:
        raise MergeError("the result sets come from different scenario files; only the same scenario can be merged")
    docs = [load_results(d) for d in dirs]
    name = docs[0]["metadata"].get("scenario") or dirs[0].parent.name
    target = new_run_dir(out_base, name)
    store = ResultStore(target)
    store.write_scenario(texts[0])
    seen: dict[tuple, Path] = {}
    for d, doc in zip(dirs, docs):
        for run in doc["runs"]:
            key = run_key(run)
            if key in seen:
                raise MergeError(f"run {run['id']} ({key}) is in both {seen[key]} and {d}: overlapping sets")
            seen[key] = d
            src = d / "raw" / run["id"]
            if src.exists():
                shutil.copytree(src, target / "raw" / run["id"], dirs_exist_ok=True)
            store.runs.append(run)
    store.runs.sort(key=run_key)
    meta = dict(docs[0]["metadata"])
    statuses = [doc["metadata"].get("status") for doc in docs]
    meta.update(merged_from=[{"dir": str(d), "shard": doc["metadata"].get("shard"), "status": s,
                              "backend": doc["metadata"].get("backend"),
                              "kernel": doc["metadata"].get("backend_kernel")}
                             for d, doc, s in zip(dirs, docs, statuses)],
                # a shard that did not finish leaves the merged set unfinished too, and its JUnit says so
                shard=None, status=next((s for s in statuses if s not in (None, "ok")), MERGED))
    points = {}
    for doc in docs:
        points.update(doc["metadata"].get("points") or {})
    meta["points"] = points
    store.set_metadata(**meta)
    store.set_extra("merged", True)
    (target / "merged-from.json").write_text(json.dumps([str(d) for d in dirs], indent=1) + "\n")
    point_latest(target.parent)   # its runs came in together, not through add_run
    return target
