"""``report.html`` of a run: the per-iteration curve, the holdout score, what was kept and why.

Self-contained (the curve is an inline PNG), written from ``metrics.json`` and the final state,
so it can be regenerated from a finished run directory.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autofe.agents.state import STOP_WORDS, Feature
from autofe.run_dir import RunDir


def write_run_report(out: Path, metrics: dict[str, Any], kept: Sequence[Feature]) -> Path:
    """Write the run's ``report.html``; return its path."""
    parts = [
        f"<h1>autofe run {html.escape(out.name)}</h1>",
        _p(
            f"Stopped: {_stop_words(metrics['stop_reason'])}. {metrics['proposed']} candidates "
            f"proposed, {metrics['accepted']} accepted, {metrics['seconds']:.0f} s, "
            f"{metrics['tokens']} LLM tokens."
        ),
        *([] if metrics["model"] else [_p("No model was written: no feature was kept.")]),
        "<h2>Holdout (latest runs by submit time, never seen by the loop)</h2>",
        _table(
            ["metric", "value"], [[k, _fmt(v)] for k, v in (metrics.get("holdout") or {}).items()]
        ),
        "<h2>Iterations (CV on the runs before the holdout)</h2>",
        _img(_curve(metrics["iterations"])),
        _table(
            ["iteration", "proposed", "gated", "kept", "features", "CV R²", "CV MAPE", "seconds"],
            [_iteration_row(h) for h in metrics["iterations"]],
        ),
        "<h2>Accepted by category</h2>",
        _table(
            ["category", "features"],
            [[k, str(v)] for k, v in metrics["accepted_by_category"].items()],
        ),
        "<h2>Rejected by stage</h2>",
        _table(
            ["stage", "candidates"], [[k, str(v)] for k, v in metrics["rejected_by_stage"].items()]
        ),
        "<h2>Kept features by importance</h2>",
        _table(["feature", "category", "share of gain", "iteration"], _kept_rows(kept)),
        *llm_section(metrics.get("llm") or {}),
    ]
    page = RunDir(out).report
    style = "body{font-family:sans-serif;max-width:1000px;margin:2em auto}td,th{padding:2px 8px}"
    page.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"><title>autofe run</title>'
        f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n",
        encoding="utf-8",
    )
    return page


def _stop_words(reason: str | None) -> str:
    return f"{reason} ({STOP_WORDS[reason]})" if reason in STOP_WORDS else str(reason)


def llm_section(llm: dict[str, Any]) -> list[str]:
    """What the LLM backend did, per round: requests, the structured-output rung, speed, how
    the prompt was fitted, every item it dropped with why, refusals and warnings (nothing for
    the offline planner, which makes no requests)."""
    rounds = [r for r in llm.get("rounds", []) if r["requests"]]
    if not rounds:
        return []
    parts = [
        "<h2>LLM backend</h2>",
        _table(
            ["round", "requests", "format", "tokens/s", "prompt tokens", "proposals", "dropped"],
            [_llm_row(r) for r in rounds],
        ),
    ]
    cuts = sorted({c for r in rounds if r["prompt"] for c in r["prompt"]["cut"]})
    if cuts:
        parts.append(_p("Cut from the prompt to fit the context: " + "; ".join(cuts) + "."))
    dropped = [[str(r["iteration"]), d["name"], d["reason"]] for r in rounds for d in r["dropped"]]
    if dropped:
        parts += ["<h3>Dropped from the answers</h3>", _table(["round", "item", "why"], dropped)]
    notes = [[str(r["iteration"]), w] for r in rounds for w in r["warnings"]]
    notes += [[str(r["iteration"]), f"refused: {r['refused']}"] for r in rounds if r["refused"]]
    if notes:
        parts += ["<h3>Warnings</h3>", _table(["round", "warning"], notes)]
    return parts


def _llm_row(r: dict[str, Any]) -> list[str]:
    speed = r["tokens_per_s"]
    return [
        str(r["iteration"]),
        str(r["requests"]),
        str(r["output_format"]),
        "" if speed is None else f"{speed:.1f}",
        str(r["prompt_tokens"]),
        str(r["proposals"]),
        str(len(r["dropped"])),
    ]


def _iteration_row(h: dict[str, Any]) -> list[str]:
    seconds = sum(h["seconds"].values())
    return [
        str(h["iteration"]),
        str(h["proposed"]),
        str(h["gated"]),
        str(h["kept"]),
        str(h["features"]),
        f"{h['cv_r2']:.3f}",
        f"{h['cv_mape']:.1%}",
        f"{seconds:.1f}",
    ]


def _kept_rows(kept: Sequence[Feature]) -> list[list[str]]:
    ordered = sorted(kept, key=lambda k: -float(k["evaluation"]["importance"]))
    return [
        [
            k["name"],
            k["category"],
            f"{k['evaluation']['importance']:.1%}",
            str(k["evaluation"]["iteration"]),
        ]
        for k in ordered
    ]


def _curve(history: Sequence[dict[str, Any]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    xs = [h["iteration"] for h in history]
    ax.plot(xs, [h["cv_r2"] for h in history], "o-", label="CV R² (log duration)")
    ax.plot(xs, [h["cv_mape"] for h in history], "s--", label="CV MAPE")
    ax.set(xlabel="iteration", ylim=(0, 1.05))
    ax.legend(loc="lower right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def _p(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def _img(png: bytes) -> str:
    return f'<img alt="iterations" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"
