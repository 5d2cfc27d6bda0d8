"""Render an evaluation :class:`~autofe.evals.report.Report` as ``report.md`` and ``report.html``.

Both carry the same tables; the HTML is self-contained (plots inline as base64 PNG), the
Markdown links the same plots written as PNG files beside it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from autofe.evals.report import Report, SetResult, best_reference, bucket_of, verdict
from autofe.modeling.metrics import Metrics, score

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Table = tuple[list[str], list[list[str]]]


def write_report(report: Report, out: Path) -> tuple[Path, Path]:
    """Write ``report.md``, ``report.html`` and the plot PNGs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    plots = {
        "predicted_vs_actual.png": _scatter_plot(report),
        "residuals.png": _residual_plot(report),
    }
    for name, png in plots.items():
        (out / name).write_bytes(png)
    sections = _sections(report)
    md = out / "report.md"
    md.write_text(_markdown(report, sections, list(plots)), encoding="utf-8")
    page = out / "report.html"
    page.write_text(_html(report, sections, list(plots.values())), encoding="utf-8")
    return md, page


def _sections(report: Report) -> list[tuple[str, str, Table]]:
    """(title, note, table) in report order."""
    return [
        ("Accuracy on the holdout", _protocol(report), accuracy_table(report)),
        ("Against the best baseline", _judge_note(), judgement_table(report)),
        ("Error by job type (MAPE, runs)", "", _breakdown(report, lambda r: report.task_types[r])),
        (
            "Error by runtime bucket (MAPE, runs)",
            "",
            _breakdown(report, lambda r: bucket_of(report.actual[r])),
        ),
        ("Features by category (count / share of gain)", "", _categories(report)),
        ("Most important features (share of gain)", "", _top_features(report)),
        ("Cycle time per phase (s)", "", _phases(report)),
        ("Cost impact on the configuration sweeps", _cost_note(report), _cost(report)),
    ]


def _protocol(report: Report) -> str:
    return (
        f"Warehouse `{report.db.name}`: {report.labelled_runs} labelled runs; the latest "
        f"{report.holdout_runs} by submit time are the holdout, predicted by models fit on the "
        "runs before them. R² is on log duration. Coverage: share of holdout runs inside the "
        "80 % / 90 % conformal intervals. Token cost: hand-written and offline-generated "
        "features use no LLM tokens."
    )


def _row(name: str, features: str, m: Metrics, coverage: Sequence[str]) -> list[str]:
    return [
        name,
        features,
        f"{m.r2:.3f}",
        f"{m.mae_s:.2f}",
        f"{m.mape:.1%}",
        f"{m.median_ape:.1%}",
        f"{m.within_10:.0%}",
        f"{m.within_20:.0%}",
        *coverage,
    ]


def accuracy_table(report: Report) -> Table:
    head = [
        "model",
        "features",
        "R²",
        "MAE s",
        "MAPE",
        "median APE",
        "±10 %",
        "±20 %",
        "80 % cover",
        "90 % cover",
    ]
    rows = [
        _row(
            f"LightGBM / {s.name}",
            str(len(s.specs)),
            s.holdout.metrics,
            [f"{s.holdout.coverage[0.8]:.1%}", f"{s.holdout.coverage[0.9]:.1%}"],
        )
        for s in report.sets
    ]
    best = report.best_simple().name if report.simple else None
    rows += [
        _row(f"{b.label}{' — best baseline' if b.name == best else ''}", "–", b.metrics, ["–"] * 2)
        for b in report.simple
    ]
    first = report.sets[0]
    rows += [
        _row(f"{name} / {first.name}", str(len(first.specs)), m, ["–", "–"])
        for name, m in report.baselines.items()
    ]
    return head, rows


def _judge_note() -> str:
    return (
        "Each set against the strongest row it must beat, by MAPE: the best simple baseline "
        "(no feature engineering) or, for a set other than the manual one, the manual set."
    )


def judgement_table(report: Report) -> Table:
    """Per set: its scores, the best reference's, and on which metrics it beats it."""
    head = ["features", "MAPE", "median APE", "log-R²", "best reference", "its MAPE"]
    head += ["its median APE", "its log-R²", "verdict"]
    rows = []
    for s in report.sets if report.simple else []:
        label, ref = best_reference(report, s)
        m = s.holdout.metrics
        rows.append([s.name, *_three(m), label, *_three(ref), verdict(m, ref)])
    return head, rows


def _three(m: Metrics) -> list[str]:
    return [f"{m.mape:.1%}", f"{m.median_ape:.1%}", f"{m.r2:.3f}"]


def _breakdown(report: Report, key: Callable[[str], str]) -> Table:
    groups = sorted({key(r) for s in report.sets for r in s.holdout.run_ids})
    head = ["group", *[s.name for s in report.sets]]
    rows = []
    for group in groups:
        cells = [group]
        for s in report.sets:
            pick = np.array([key(r) == group for r in s.holdout.run_ids])
            m = score(s.holdout.actual[pick], s.holdout.predicted[pick])
            cells.append(f"{m.mape:.1%} ({m.n})")
        rows.append(cells)
    return head, rows


def _categories(report: Report) -> Table:
    cats = sorted({c for s in report.sets for c in s.counts_by_category()})
    head = ["category", *[s.name for s in report.sets]]
    rows = []
    for cat in cats:
        cells = [cat]
        for s in report.sets:
            count = s.counts_by_category().get(cat, 0)
            share = s.importance_by_category().get(cat, 0.0)
            cells.append(f"{count} / {share:.0%}")
        rows.append(cells)
    return head, rows


def _top_features(report: Report, k: int = 10) -> Table:
    head = ["rank", *[s.name for s in report.sets]]
    ranked = [sorted(s.importance.items(), key=lambda kv: -kv[1])[:k] for s in report.sets]
    rows = []
    for i in range(k):
        cells = [str(i + 1)]
        for top in ranked:
            cells.append(f"{top[i][0]} ({top[i][1]:.0%})" if i < len(top) else "")
        rows.append(cells)
    return head, rows


def _phases(report: Report) -> Table:
    phases = list(report.sets[0].seconds)
    return ["phase", *[s.name for s in report.sets]], [
        [p, *[f"{s.seconds.get(p, 0.0):.2f}" for s in report.sets]] for p in phases
    ]


def _cost_note(report: Report) -> str:
    if not any(s.cost for s in report.sets):
        return "This warehouse has no configuration sweeps (runs tagged `sweep`)."
    points = next(s.cost[0].points for s in report.sets if s.cost)
    return (
        f"{points} sweep points predicted out of time, every candidate configuration run. "
        "Deadline per point: 1.5 × its fastest true runtime. Cost = true runtime × hourly "
        "price. Saving is against the static mid-size configuration; regret is the extra cost "
        "over the oracle."
    )


def _cost(report: Report) -> Table:
    head = ["features", "policy", "cost USD", "deadlines met", "saving vs static", "regret"]
    rows = [
        [
            s.name,
            r.policy,
            f"{r.cost:.4f}",
            f"{r.deadlines_met:.0%}",
            f"{r.saving_vs_static:+.1%}",
            f"{r.regret_vs_oracle:+.1%}",
        ]
        for s in report.sets
        for r in s.cost
    ]
    return head, rows


def _markdown(report: Report, sections: list[tuple[str, str, Table]], images: list[str]) -> str:
    parts = ["# autofe evaluation report", ""]
    for title, note, (head, rows) in sections:
        parts += [f"## {title}", ""]
        if note:
            parts += [note, ""]
        if rows:
            parts += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            parts += ["| " + " | ".join(r) + " |" for r in rows]
            parts.append("")
    parts += ["## Plots", ""] + [f"![{name}]({name})" for name in images]
    return "\n".join(parts) + "\n"


def _html(report: Report, sections: list[tuple[str, str, Table]], images: list[bytes]) -> str:
    body = ["<h1>autofe evaluation report</h1>"]
    for title, note, (head, rows) in sections:
        body.append(f"<h2>{html.escape(title)}</h2>")
        if note:
            body.append(f"<p>{html.escape(note)}</p>")
        if rows:
            body.append(_html_table(head, rows))
    body.append("<h2>Plots</h2>")
    for png in images:
        data = base64.b64encode(png).decode("ascii")
        body.append(f'<img alt="plot" src="data:image/png;base64,{data}">')
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse;margin-bottom:1em}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>autofe evaluation</title>'
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{trs}</table>"


def _figure(sets: list[SetResult], draw: Callable[[Axes, SetResult], None]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(sets), figsize=(4.5 * len(sets), 4), squeeze=False)
    for ax, s in zip(axes[0], sets, strict=True):
        draw(ax, s)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def _scatter_plot(report: Report) -> bytes:
    def draw(ax: Axes, s: SetResult) -> None:
        a, p = s.holdout.actual, s.holdout.predicted
        low, high = float(min(a.min(), p.min())), float(max(a.max(), p.max()))
        ax.loglog(a, p, ".", alpha=0.6)
        ax.plot([low, high], [low, high], "k--", lw=1)
        ax.set(title=f"{s.name}: predicted vs actual", xlabel="actual s", ylabel="p50 s")

    return _figure(report.sets, draw)


def _residual_plot(report: Report) -> bytes:
    def draw(ax: Axes, s: SetResult) -> None:
        a, p = s.holdout.actual, s.holdout.predicted
        ax.semilogx(a, np.log(p / a), ".", alpha=0.6)
        ax.axhline(0.0, color="k", lw=1)
        ax.set(title=f"{s.name}: residuals", xlabel="actual s", ylabel="log(p50 / actual)")

    return _figure(report.sets, draw)
