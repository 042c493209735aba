"""A result set's report as a page: report.md beside the figures, and report.html with everything
inline (figures as data URIs), so one file can be mailed or archived and still show it all."""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from runners.analysis.summary import comparison_lines, fidelity_lines, subflow_warnings, subflows_text
from runners.analysis.verdicts import Verdict
from runners.results.derived import counts_text
from runners.results.fidelity import reasons_text, status_of

META_KEYS = ("scenario", "status", "started_utc", "finished_utc", "backend", "backend_kernel", "host_kernel",
             "kernel_version", "iperf3", "iperf3_mptcp", "iproute2", "mininet", "python", "git_revision",
             "git_dirty", "seed", "repeat", "wall_seconds")
RUN_COLUMNS = ("run", "point", "mode", "primary", "status", "Mbit/s", "s", "subflows", "OFO tcp/mptcp", "retrans",
               "fidelity")


def _meta_rows(meta: dict) -> list[tuple[str, str]]:
    rows = [(k, str(meta[k])) for k in META_KEYS if meta.get(k) is not None]
    vm = meta.get("vm") or {}
    if vm:
        rows.append(("vm", f"{vm.get('kernel')} ({vm.get('accel')}, {vm.get('cpus')} CPUs, {vm.get('memory')})"))
    return rows


def _run_rows(runs: list[dict]) -> list[tuple[str, ...]]:
    out = []
    for r in runs:
        m = r["metrics"]
        out.append((r["id"], r.get("point_label", "base"), r["mode"], r["primary"], r["status"],
                    f"{m['throughput_mbps']:.2f}", f"{m.get('seconds') or 0:.2f}", subflows_text(m),
                    *counts_text(m), status_of(r) or "-"))
    return out


def _html_runs_table(runs: list[dict]) -> str:
    """The runs table with each run's fidelity as a badge (ok, warn, unfaithful), its reasons as its title."""
    th = "".join(f"<th>{html.escape(h)}</th>" for h in RUN_COLUMNS)
    body = ""
    for r, row in zip(runs, _run_rows(runs)):
        status = row[-1]
        badge = (f'<span class="badge fid-{html.escape(status)}" title="{html.escape(reasons_text(r))}">'
                 f"{html.escape(status)}</span>")
        body += "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row[:-1]) + f"<td>{badge}</td></tr>"
    return f'<table class="runs"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


EVENT_COLUMNS = ("run", "change", "what", "planned s", "applied s", "drift ms", "took ms", "stall s", "recovery s",
                 "bytes per path after it", "MPTCP events after it (s)")


def _num(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def _event_rows(runs: list[dict]) -> list[tuple[str, ...]]:
    """Each run's changes: planned against applied, and what each did (recovery, or why there was none)."""
    out = []
    for r in runs:
        for c in (r.get("events") or {}).get("changes", []):
            if c.get("applied_s") is None:
                out.append((r["id"], c["event"], c.get("detail", ""), _num(c["planned_s"], "g"), "not applied",
                            "", "", "", "", "", c.get("not_applied", "")))
                continue
            seen = "; ".join(f"{node}: " + ", ".join(f"{k} +{v:.2f}" for k, v in evs.items())
                             for node, evs in (c.get("mptcp_events") or {}).items())
            out.append((r["id"], c["event"], f"{c['target']} {c.get('detail', '')}", _num(c["planned_s"], "g"),
                        _num(c["applied_s"], ".3f"), _num(c.get("drift_ms"), ".1f"), _num(c.get("took_ms"), ".0f"),
                        _num(c.get("stall_s"), ".2f"),
                        _num(c.get("recovery_s"), ".2f") or f"none: {c.get('no_recovery') or c.get('error', '')}",
                        _bytes_after(c), seen))
    return out


def _bytes_after(change: dict) -> str:
    """`A 0.05 MB, B 1.71 MB; backup 97 %`: what each path delivered from the change to the next one."""
    text = ", ".join(f"{p} {b / 1e6:.2f} MB" for p, b in (change.get("bytes_after") or {}).items())
    share = change.get("backup_share")
    return text + (f"; backup {share:.0%}" if share is not None else "")


def _verdict_rows(verdicts: list[Verdict]) -> list[tuple[str, ...]]:
    return [(v.label, v.name, v.outcome, v.detail) for v in verdicts]


def _md_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(run_dir: Path, doc: dict, scenario_text: str, verdicts: list[Verdict],
                    figures: list[Path]) -> str:
    meta = doc.get("metadata", {})
    parts = [f"# {meta.get('scenario', run_dir.name)}: {run_dir.name}", "",
             _md_table(("what", "value"), _meta_rows(meta)), "", "## Runs", "",
             _md_table(RUN_COLUMNS, _run_rows(doc["runs"])), ""]
    parts += [f"- {line}" for line in comparison_lines(doc["runs"]) + subflow_warnings(doc["runs"])
              + fidelity_lines(doc["runs"])] + [""]
    events = _event_rows(doc["runs"])
    if events:
        parts += ["## Events", "", _md_table(EVENT_COLUMNS, events), ""]
    if verdicts:
        parts += ["## Verdicts", "", _md_table(("point", "expectation", "verdict", "detail"), _verdict_rows(verdicts)),
                  ""]
    parts += ["## Figures", ""] + [f"![{f.stem}]({f.relative_to(run_dir).as_posix()})" for f in figures]
    parts += ["", "## Scenario", "", "```yaml", scenario_text.rstrip(), "```", ""]
    return "\n".join(parts)


def _html_table(head: tuple[str, ...], rows: list[tuple[str, ...]], cls: str = "") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0}.pass{color:#070}.fail{color:#b00;font-weight:bold}.inconclusive{color:#a60}
.badge{padding:1px 6px;border-radius:3px;color:#fff;background:#888}.fid-ok{background:#2a7}
.fid-warn{background:#d90}.fid-unfaithful{background:#c22;font-weight:bold}
figure{display:inline-block;margin:1em}figure img{max-width:560px;border:1px solid #ddd}
pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}"""


def _script_json(value) -> str:
    """JSON that cannot close the <script> element it sits in."""
    return json.dumps(value, default=str).replace("</", "<\\/")


def render_html(run_dir: Path, doc: dict, scenario_text: str, verdicts: list[Verdict], figures: list[Path]) -> str:
    meta = doc.get("metadata", {})
    title = f"{meta.get('scenario', run_dir.name)}: {run_dir.name}"
    verdict_html = ""
    if verdicts:
        rows = "".join(f'<tr><td>{html.escape(v.label)}</td><td>{html.escape(v.name)}</td>'
                       f'<td class="{v.outcome}">{html.escape(v.outcome)}</td><td>{html.escape(v.detail)}</td></tr>'
                       for v in verdicts)
        verdict_html = ("<h2>Verdicts</h2><table><thead><tr><th>point</th><th>expectation</th><th>verdict</th>"
                        f"<th>detail</th></tr></thead><tbody>{rows}</tbody></table>")
    figs = "".join(f'<figure><img alt="{html.escape(f.stem)}" src="data:image/png;base64,'
                   f'{base64.b64encode(f.read_bytes()).decode()}"><figcaption>{html.escape(f.stem)}</figcaption>'
                   f"</figure>" for f in figures if f.suffix == ".png")
    lines = "".join(f"<li>{html.escape(line)}</li>"
                    for line in comparison_lines(doc["runs"]) + subflow_warnings(doc["runs"])
                    + fidelity_lines(doc["runs"]))
    events = _event_rows(doc["runs"])
    if events:
        lines += f"</ul><h2>Events</h2>{_html_table(EVENT_COLUMNS, events, 'events')}<ul>"
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
            f"{_html_table(('what', 'value'), _meta_rows(meta), 'meta')}"
            f"<h2>Runs</h2>{_html_runs_table(doc['runs'])}<ul>{lines}</ul>"
            f"{verdict_html}<h2>Figures</h2><div class=figures>{figs}</div>"
            f"<h2>Scenario</h2><pre>{html.escape(scenario_text)}</pre>"
            f"<script type=application/json id=metadata>{_script_json(meta)}</script>"
            "</body></html>\n")
