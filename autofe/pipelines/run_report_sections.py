"""The run report's sections on the holdout: the headline, predicted vs actual, error by job,
the baselines; and the small HTML helpers every section uses.

Pure functions from the run's records (``metrics.json``, ``holdout.json``'s rows) to HTML
strings, so :mod:`autofe.pipelines.run_report` only reads files and puts the page together
(the loop's own sections are in :mod:`autofe.pipelines.run_report_loop`). Every section says
in a sentence what is missing when its record is absent (a run from before the record
existed, or one that kept no feature) rather than failing or silently leaving a hole.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autofe.svg import Series, bars_svg, chart_svg

WORST_JOBS = 15
"""Jobs drawn as bars (the table lists every job)."""


@dataclass(frozen=True)
class JobError:
    """One job's error on the holdout runs."""

    job_id: str
    name: str
    runs: int
    mape: float
    median_ape: float
    inside_80: float


def headline(metrics: Mapping[str, Any]) -> list[str]:
    """The model's holdout numbers beside the best baseline's, and the verdict between them."""
    h = metrics.get("holdout")
    if not h:
        return [p("No model was written: no feature was kept, so there is no holdout score.")]
    best = best_baseline(metrics)
    label = f"best baseline: {best['label']}" if best else "best baseline"
    rows = [
        ["holdout MAPE", pct(h["mape"]), pct(best["mape"]) if best else "—"],
        ["median APE", pct(h["median_ape"]), pct(best["median_ape"]) if best else "—"],
        ["80 % interval coverage", pct(h.get("coverage_80")), "— (no interval)" if best else "—"],
        ["90 % interval coverage", pct(h.get("coverage_90")), "— (no interval)" if best else "—"],
        *_coverage_by_novelty(h, best is not None),
    ]
    return [
        p(f"On the {h['n']} latest runs by submit time, which the loop never saw."),
        table(["", "model", label], rows, table_id="headline-scores"),
        p(verdict(metrics)),
    ]


def _coverage_by_novelty(h: Mapping[str, Any], baseline: bool) -> list[list[str]]:
    """80 % / 90 % coverage of the holdout runs new to their job's history and of the reruns,
    when the run recorded them: a pooled coverage can hide one kind's intervals being too
    narrow.

    >>> _coverage_by_novelty({"n": 3, "novel_runs": 1, "coverage_80_novel": 1.0,
    ...     "coverage_90_novel": 1.0, "coverage_80_familiar": 0.5,
    ...     "coverage_90_familiar": 1.0}, False)[0]
    ['80 % / 90 % coverage, 1 run new to its job', '100.0% / 100.0%', '—']
    """
    if "novel_runs" not in h:
        return []
    novel, rest = int(h["novel_runs"]), int(h["n"]) - int(h["novel_runs"])
    rows = []
    for kind, count, label in (
        (
            "novel",
            novel,
            f"{novel} run{'s' * (novel != 1)} new to {'its' if novel == 1 else 'their'} job",
        ),
        ("familiar", rest, f"{rest} rerun{'s' * (rest != 1)} of a known setting"),
    ):
        if count:
            both = f"{pct(h.get(f'coverage_80_{kind}'))} / {pct(h.get(f'coverage_90_{kind}'))}"
            rows.append(
                [f"80 % / 90 % coverage, {label}", both, "— (no interval)" if baseline else "—"]
            )
    return rows


def best_baseline(metrics: Mapping[str, Any]) -> dict[str, Any] | None:
    """The baseline ``metrics["best_baseline"]`` names (None for a run without baselines)."""
    chosen = metrics.get("best_baseline")
    return next((b for b in metrics.get("baselines") or [] if b["name"] == chosen), None)


def verdict(metrics: Mapping[str, Any]) -> str:
    """One sentence: does the model beat the strongest simple baseline on the same runs?

    >>> verdict({"holdout": {"mape": 0.2}, "best_baseline": "b",
    ...          "baselines": [{"name": "b", "label": "job median", "mape": 0.25}]})
    'The model beats the best baseline (job median, MAPE 25.0%) by 5.0 points of MAPE.'
    """
    best = best_baseline(metrics)
    if best is None:
        return (
            "No baselines in metrics.json (a run from before they were recorded): "
            "the model's score cannot be set beside what no model scores."
        )
    points = (best["mape"] - metrics["holdout"]["mape"]) * 100
    word = "beats" if points > 0.05 else "loses to" if points < -0.05 else "ties with"
    return (
        f"The model {word} the best baseline ({best['label']}, MAPE {pct(best['mape'])}) "
        f"by {abs(points):.1f} points of MAPE."
    )


def predicted_vs_actual(rows: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Every holdout run's prediction against its actual on log axes, with its 80 % interval."""
    if rows is None:
        return [p(MISSING_HOLDOUT)]
    series = Series(
        "holdout run",
        [r["actual_s"] for r in rows],
        [r["p50_s"] for r in rows],
        [r["low_80"] for r in rows],
        [r["high_80"] for r in rows],
    )
    svg = chart_svg(
        [series],
        title="predicted vs actual seconds, holdout runs",
        x_label="actual seconds",
        y_label="predicted seconds (median)",
        log_x=True,
        log_y=True,
        diagonal=True,
        height=420,
    )
    inside = sum(r["low_80"] <= r["actual_s"] <= r["high_80"] for r in rows)
    return [
        f'<figure id="predicted-vs-actual">{svg}</figure>',
        p(
            f"{len(rows)} runs, each a point with its 80 % interval as a bar; {inside} actuals "
            "fall inside theirs. On the dashed diagonal a prediction is exact; above it the model "
            "predicted too long."
        ),
    ]


MISSING_HOLDOUT = (
    "No holdout.json in this run folder (a run from before it was written, or one that kept "
    "no feature): predicted vs actual and the error by job cannot be drawn."
)


def job_errors(rows: Sequence[Mapping[str, Any]], names: Mapping[str, str]) -> list[JobError]:
    """Each job's holdout error, worst MAPE first (ties by job id, so the order is stable).

    >>> [e.job_id for e in job_errors([{"job_id": "a", "actual_s": 10, "p50_s": 11,
    ...     "low_80": 9, "high_80": 12}, {"job_id": "b", "actual_s": 10, "p50_s": 20,
    ...     "low_80": 15, "high_80": 25}], {})]
    ['b', 'a']
    """
    by_job: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_job.setdefault(str(r["job_id"]), []).append(r)
    errors = []
    for job, runs in by_job.items():
        ape = [abs(r["p50_s"] - r["actual_s"]) / r["actual_s"] for r in runs]
        inside = sum(r["low_80"] <= r["actual_s"] <= r["high_80"] for r in runs)
        errors.append(
            JobError(
                job,
                names.get(job, job),
                len(runs),
                statistics.fmean(ape),
                statistics.median(ape),
                inside / len(runs),
            )
        )
    return sorted(errors, key=lambda e: (-e.mape, e.job_id))


def by_job(rows: Sequence[Mapping[str, Any]] | None, names: Mapping[str, str]) -> list[str]:
    """The error by job: the worst jobs as bars, then every job in a table, worst first."""
    if rows is None:
        return [p(MISSING_HOLDOUT)]
    errors = job_errors(rows, names)
    worst = errors[:WORST_JOBS]
    bars = bars_svg(
        [_job_label(e) for e in worst],
        [e.mape for e in worst],
        title=f"MAPE of the {len(worst)} worst jobs on the holdout",
    )
    body = [
        [_job_label(e), str(e.runs), pct(e.mape), pct(e.median_ape), pct(e.inside_80)]
        for e in errors
    ]
    return [
        f'<figure id="worst-jobs">{bars}</figure>',
        table(
            ["job", "holdout runs", "MAPE", "median APE", "inside 80 % interval"],
            body,
            table_id="by-job",
        ),
    ]


def _job_label(e: JobError) -> str:
    return e.name if e.name == e.job_id else f"{e.name} ({e.job_id})"


def baselines(metrics: Mapping[str, Any]) -> list[str]:
    """The model's row first, then every baseline by MAPE, the best one marked."""
    h, listed = metrics.get("holdout"), metrics.get("baselines")
    if not h or not listed:
        return [p(verdict(metrics) if h else "No model, so nothing to set beside the baselines.")]
    head = ["predictor", "MAPE", "median APE", "log-R²", "within ±20 %", "runs"]
    model = [
        f"autofe model ({metrics.get('accepted', '?')} features)",
        *_scores(h["mape"], h["median_ape"], h["r2"], h.get("within_20"), h["n"]),
    ]
    ordered = sorted(listed, key=lambda b: b["mape"])
    best = metrics.get("best_baseline")
    body, classes = [model], ["model"]
    for b in ordered:
        mark = " — best baseline" if b["name"] == best else ""
        scores = _scores(b["mape"], b["median_ape"], b["log_r2"], b["within_20"], b["runs"])
        body.append([f"{b['label']} ({b['name']}){mark}", *scores])
        classes.append("best" if mark else "")
    return [table(head, body, row_class=classes, table_id="baselines"), p(verdict(metrics))]


def _scores(mape: float, median: float, r2: float, within: float | None, n: int) -> list[str]:
    return [pct(mape), pct(median), f"{r2:.3f}", pct(within), str(n)]


def pct(share: float | None) -> str:
    """A share as a percentage with one decimal (a dash when unknown).

    >>> pct(0.2561), pct(None)
    ('25.6%', '—')
    """
    return "—" if share is None else f"{share:.1%}"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def p(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    row_class: Sequence[str] = (),
    table_id: str = "",
    table_class: str = "",
) -> str:
    """An HTML table of escaped text cells; ``row_class[i]`` classes row ``i``."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = []
    for i, r in enumerate(rows):
        cls = row_class[i] if i < len(row_class) else ""
        attr = f' class="{esc(cls)}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>")
    attrs = (f' id="{esc(table_id)}"' if table_id else "") + (
        f' class="{esc(table_class)}"' if table_class else ""
    )
    return f"<table{attrs}><tr>{th}</tr>{''.join(body)}</table>"
