"""The run report's sections on what the loop did: its rounds, what it kept, its LLM backend.

Pure functions from ``metrics.json``'s records and the kept features to HTML strings (the
holdout's sections are in :mod:`autofe.pipelines.run_report_sections`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from autofe.agents.state import Feature
from autofe.pipelines.run_report_sections import esc, p, pct, table
from autofe.svg import Series, chart_svg


def iterations(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """CV R², CV MAPE and what-if MAPE per round as a chart, and the rounds' table.

    The what-if MAPE (configurations held out with their outcomes hidden) is the second
    question each round is judged on; a round without it (one configuration, too few runs per
    fold, records written before it) shows "n/a", and the curve skips it.
    """
    xs = [float(h["iteration"]) for h in history]
    style: Literal["points", "line"] = "line" if len(history) > 1 else "points"
    series = [
        Series("CV R² (log duration)", xs, [h["cv_r2"] for h in history], style=style),
        Series("CV MAPE", xs, [h["cv_mape"] for h in history], style=style),
    ]
    whatif = [_whatif(h) for h in history]
    if any(math.isfinite(w) for w in whatif):
        series.append(Series("what-if MAPE (configuration held out)", xs, whatif, style=style))
    chart = chart_svg(
        series,
        title="cross-validated and what-if score per round",
        x_label="round",
        y_label="score",
        y_format="{:.2f}",
    )
    head = ["round", "proposed", "gated", "kept", "features", "CV R²", "CV MAPE", "what-if MAPE"]
    return [
        f'<figure id="rounds">{chart}</figure>',
        table(
            [*head, "seconds", "of which what-if"],
            [_iteration_row(h) for h in history],
            table_id="iterations",
        ),
    ]


def pruning(record: Mapping[str, Any] | None) -> list[str]:
    """How the kept features were pruned before the model (``metrics.json``'s ``pruning``):
    one sentence, and each head tried with its scores beside the whole set's.

    >>> pruning(None)
    []
    >>> pruning({"before": 3, "after": 3, "reason": "fewer than two features", "whole": None,
    ...          "tried": []})[0]
    '<p>Pruning kept 3 of 3 features: fewer than two features.</p>'
    """
    if not record:
        return []
    before, after = record["before"], record["after"]
    out = [p(f"Pruning kept {after} of {before} features: {record['reason']}.")]
    whole = record.get("whole")
    if whole and record.get("tried"):
        rows = [_pruning_row("all kept", whole)]
        rows += [_pruning_row(f"head carrying {t['level']:.0%}", t) for t in record["tried"]]
        head = ["set", "features", "CV R²", "CV MAPE", "what-if MAPE", "verdict"]
        out.append(table(head, rows, table_id="pruning"))
    return out


def _pruning_row(label: str, scored: Mapping[str, Any]) -> list[str]:
    whatif = scored.get("whatif_mape")
    return [
        label,
        str(scored["features"]),
        f"{scored['cv_r2']:.4f}",
        pct(scored["cv_mape"]),
        "n/a" if whatif is None else pct(whatif),
        scored.get("verdict") or "—",
    ]


def _whatif(h: Mapping[str, Any]) -> float:
    value = h.get("whatif_mape")
    return math.nan if value is None else float(value)


def _iteration_row(h: Mapping[str, Any]) -> list[str]:
    whatif = _whatif(h)
    return [
        str(h["iteration"]),
        str(h["proposed"]),
        str(h["gated"]),
        str(h["kept"]),
        str(h["features"]),
        f"{h['cv_r2']:.3f}",
        pct(h["cv_mape"]),
        pct(whatif) if math.isfinite(whatif) else "n/a",
        f"{sum(h['seconds'].values()):.1f}",
        f"{h['seconds']['whatif']:.1f}" if "whatif" in h["seconds"] else "n/a",
    ]


def kept_features(kept: Sequence[Feature], titles: Mapping[str, str]) -> list[str]:
    """Kept features by category (most gain first), each with its knowledge-base documents."""
    if not kept:
        return [p("No feature was kept.")]
    groups: dict[str, list[Feature]] = {}
    for k in sorted(kept, key=lambda k: -_importance(k)):
        groups.setdefault(k["category"], []).append(k)
    parts = []
    for category, features in sorted(groups.items(), key=lambda g: -sum(map(_importance, g[1]))):
        share = sum(map(_importance, features))
        parts.append(f"<h3>{esc(category)}: {len(features)}, {pct(share)} of the gain</h3>")
        rows = [
            [
                k["name"],
                pct(_importance(k)),
                str(k.get("evaluation", {}).get("iteration", "")),
                "; ".join(_kb_name(r, titles) for r in k["kb_refs"]) or "—",
            ]
            for k in features
        ]
        head = ["feature", "share of gain", "round", "knowledge-base references"]
        parts.append(table(head, rows, table_class="kept"))
    return parts


def _importance(k: Feature) -> float:
    return float(k.get("evaluation", {}).get("importance", 0.0))


def _kb_name(ref: str, titles: Mapping[str, str]) -> str:
    return f"{titles[ref]} ({ref})" if ref in titles else ref


def llm_section(llm: Mapping[str, Any]) -> list[str]:
    """What the LLM backend did, per round: requests, the structured-output rung, speed, how
    the prompt was fitted, every item it dropped with why, refusals and warnings (nothing for
    the offline planner, which makes no requests)."""
    rounds = [r for r in llm.get("rounds", []) if r["requests"]]
    if not rounds:
        return []
    parts = [
        "<h2>LLM backend</h2>",
        table(
            ["round", "requests", "format", "tokens/s", "prompt tokens", "proposals", "dropped"],
            [_llm_row(r) for r in rounds],
        ),
    ]
    cuts = sorted({c for r in rounds if r["prompt"] for c in r["prompt"]["cut"]})
    if cuts:
        parts.append(p("Cut from the prompt to fit the context: " + "; ".join(cuts) + "."))
    dropped = [[str(r["iteration"]), d["name"], d["reason"]] for r in rounds for d in r["dropped"]]
    if dropped:
        parts += ["<h3>Dropped from the answers</h3>", table(["round", "item", "why"], dropped)]
    notes = [[str(r["iteration"]), w] for r in rounds for w in r["warnings"]]
    notes += [[str(r["iteration"]), f"refused: {r['refused']}"] for r in rounds if r["refused"]]
    if notes:
        parts += ["<h3>Warnings</h3>", table(["round", "warning"], notes)]
    return parts


def _llm_row(r: Mapping[str, Any]) -> list[str]:
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
