"""Eval output: a terminal table, and JSON + Markdown + PNG under ``evals/reports/``.

The JSON holds everything (per session, per summariser, totals); the Markdown is the same in
tables a person reads in a PR; the PNG plots the gated metrics per summariser side by side.
matplotlib is imported only when the plot is drawn (it is an eval-only dependency).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evals.run import REPORTS, EvalRun

#: (key, column label, format) for the per-session table.
COLUMNS: list[tuple[str, str]] = [
    ("file_precision", "file P"), ("file_recall", "file R"), ("decision_recall_keyword", "dec R (kw)"),
    ("decision_recall_llm", "dec R (llm)"), ("phase_coverage", "phases"), ("end_state", "end"),
    ("end_state_correct", "end ok"),
    ("faithfulness_violations", "unfaithful"), ("language_match", "lang ok"), ("secrets_leaked", "secrets"),
    ("structure_problems", "structure"), ("note_tokens", "note tok"), ("input_tokens", "in tok"),
    ("output_tokens", "out tok"), ("cost_usd", "cost $"),
]
TOTAL_COLUMNS: list[tuple[str, str]] = [
    ("sessions", "sessions"), ("file_precision", "file P"), ("file_recall", "file R"),
    ("decision_recall_keyword", "dec R (kw)"), ("decision_recall_llm", "dec R (llm)"),
    ("phase_coverage", "phases"), ("end_state_correct", "end ok"), ("end_state_exact", "end exact"), ("false_success", "false success"),
    ("faithfulness_violations", "unfaithful"), ("language_match", "lang ok"), ("secrets_leaked", "secrets"),
    ("structure_valid", "structure ok"), ("note_tokens_mean", "note tok"), ("llm_calls", "calls"),
    ("input_tokens", "in tok"), ("output_tokens", "out tok"), ("cost_usd", "cost $"),
    ("fallbacks", "fallbacks"), ("not_recorded", "not recorded"),
]
PLOT_METRICS = [("file_precision", "file precision"), ("file_recall", "file recall"),
                ("decision_recall_keyword", "decision recall (kw)"), ("decision_recall_llm", "decision recall (llm)"),
                ("end_state_correct", "end state"), ("language_match", "language"), ("structure_valid", "structure")]


def cell(value: Any, key: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, list):
        return str(len(value)) if key != "structure_problems" else ("ok" if not value else f"{len(value)} problems")
    if isinstance(value, float):
        return f"{value:.4f}" if key == "cost_usd" else f"{value:.2f}"
    return str(value)


def markdown(run: EvalRun) -> str:
    lines = [f"# distill eval — {run.started_at}", "",
             f"{len(run.cases)} sessions, summarisers: {', '.join(run.summarisers)}; "
             f"LLM judge: {run.judge or 'none (keyword judge only)'}; {run.elapsed_s:.1f} s.", "",
             "## Totals by part", "",
             "**test** is blind (gold written before any output was read, no rule tuned on it): the gates "
             "hold there. **dev** is what rules are tuned on.", "",
             "| summariser | part | " + " | ".join(c for _k, c in TOTAL_COLUMNS) + " |",
             "|---" * (len(TOTAL_COLUMNS) + 2) + "|"]
    for name, parts in run.split_totals.items():
        for part in ("test", "dev"):
            t = parts.get(part) or {}
            if t.get("sessions") or t.get("not_recorded"):
                lines.append(f"| {name} | {part} | " + " | ".join(cell(t.get(k), k) for k, _c in TOTAL_COLUMNS) + " |")
    for name in run.summarisers:
        lines += ["", f"## {name}", "", "| session | " + " | ".join(c for _k, c in COLUMNS) + " |",
                  "|---" * (len(COLUMNS) + 1) + "|"]
        for r in (r for r in run.results if r.summariser == name):
            if r.status != "ok":
                lines.append(f"| {r.case} | {r.status}{': ' + r.error if r.error else ''} |")
                continue
            lines.append(f"| {r.case} | " + " | ".join(cell(r.values.get(k), k) for k, _c in COLUMNS) + " |")
        details = []
        for r in (r for r in run.results if r.summariser == name and r.status == "ok"):
            v = r.values
            bits = []
            if v["files_missed"]:
                bits.append("missed files: " + ", ".join(f"`{x}`" for x in v["files_missed"]))
            if v["files_extra"]:
                bits.append("extra files: " + ", ".join(f"`{x}`" for x in v["files_extra"][:8]))
            if not v["end_state_correct"]:
                bits.append(f"end state {v['end_state']} (gold {v['end_state_gold']})")
            if not v["language_match"]:
                bits.append(f"language {v['language']} (gold {v['language_gold']})")
            if v["faithfulness_violations"]:
                bits.append("not in transcript: " + ", ".join(f"`{x}`" for x in v["faithfulness_violations"][:6]))
            if v["secrets_leaked"]:
                bits.append("secrets: " + ", ".join(v["secrets_leaked"]))
            if v["structure_problems"]:
                bits.append("structure: " + "; ".join(v["structure_problems"]))
            if bits:
                details.append(f"- **{r.case}**: " + "; ".join(bits))
        if details:
            lines += ["", "Findings:", "", *details]
    return "\n".join(lines) + "\n"


def plot(run: EvalRun, path: Path) -> Path:
    """Grouped bars: one group per gated metric, one bar per summariser (0–1 scale)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on CI
    import matplotlib.pyplot as plt

    names = run.summarisers
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
    for i, name in enumerate(names):
        t = run.totals[name]
        ys = [t.get(k) if t.get(k) is not None else 0.0 for k, _l in PLOT_METRICS]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(PLOT_METRICS))]
        bars = ax.bar(xs, ys, width, label=f"{name} (n={t['sessions']})")
        for b, k in zip(bars, PLOT_METRICS, strict=True):
            if t.get(k[0]) is None:
                b.set_hatch("//")
                b.set_alpha(0.3)
    ax.set_xticks(range(len(PLOT_METRICS)), [label for _k, label in PLOT_METRICS], rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (higher is better)")
    ax.set_title(f"distill eval, {len(run.cases)} sessions — {run.started_at[:10]}")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_reports(run: EvalRun, directory: Path = REPORTS, stem: str = "latest", png: bool = True) -> list[Path]:
    """``<stem>.json``, ``<stem>.md`` and (unless ``png=False``) ``<stem>.png`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    data = asdict(run)
    js = directory / f"{stem}.json"
    js.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n", "utf-8")
    md = directory / f"{stem}.md"
    md.write_text(markdown(run), "utf-8")
    out = [js, md]
    if png:
        out.append(plot(run, directory / f"{stem}.png"))
    return out


def terminal_table(run: EvalRun, *, totals_only: bool = False) -> str:
    """Plain text: per-session rows per summariser, then totals per part (what the CLI prints)."""
    rows: list[list[str]] = []
    head = ["summariser", "session", *[c for _k, c in COLUMNS]]
    for r in [] if totals_only else run.results:
        if r.status != "ok":
            rows.append([r.summariser, r.case, r.status])
            continue
        rows.append([r.summariser, r.case, *[cell(r.values.get(k), k) for k, _c in COLUMNS]])
    for name, t, label in [(n, p.get(part) or {}, f"TOTAL {part}") for n, p in run.split_totals.items()
                           for part in ("dev", "test")]:
        if not t.get("sessions"):
            continue
        rows.append([name, label, cell(t["file_precision"]), cell(t["file_recall"]),
                     cell(t["decision_recall_keyword"]), cell(t["decision_recall_llm"]), cell(t["phase_coverage"]), "",
                     cell(t["end_state_correct"]), str(t["faithfulness_violations"]), cell(t["language_match"]),
                     str(t["secrets_leaked"]), cell(t["structure_valid"]), cell(t["note_tokens_mean"]),
                     str(t["input_tokens"]), str(t["output_tokens"]), cell(t["cost_usd"], "cost_usd")])
    widths = [max(len(str(x)) for x in col) for col in zip(*[head + [""] * 0, *[r + [""] * (len(head) - len(r)) for r in rows]], strict=False)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head)]
    out += [fmt.format(*(r + [""] * (len(head) - len(r)))) for r in rows]
    return "\n".join(out)
