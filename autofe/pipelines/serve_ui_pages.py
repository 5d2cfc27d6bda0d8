"""The ``/ui`` dashboard's HTML: three self-contained pages and the login form.

Each page is one document with its CSS inline and its charts as inline SVG
(:mod:`autofe.svg`): no JavaScript, no external URL (not even a favicon request), so it works
offline, behind a proxy that strips scripts, and printed. Every value from a file is escaped.
The ids and classes here are the page contract the browser tests rely on (docs/dashboard.md).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from autofe import __version__
from autofe.pipelines.serve_ui_data import (
    PSI_LEVELS,
    ModelData,
    PredictionsData,
    SchedulerData,
)
from autofe.scheduler.budget_period import BudgetPeriod
from autofe.scheduler.store import JobRecord, Snapshot
from autofe.svg import Series, bars_svg, chart_svg

PAGES = (("model", "Model"), ("predictions", "Predictions"), ("scheduler", "Scheduler"))
Row = tuple[Mapping[str, str], Sequence[str]]
"""A table row: its attributes, and its cells as HTML already escaped."""
NO_DATA = "no data yet"

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
nav{background:#23395d;padding:.6em 1em}nav a{color:#fff;margin-right:1.5em;text-decoration:none}
nav a[aria-current=page]{font-weight:bold;text-decoration:underline}
main{padding:0 1.5em 2em;max-width:1400px}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0;background:#fff}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eef}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.active td{background:#e6f4e6;font-weight:bold}tr.alert td{background:#fde8e8}
tr.empty td{color:#777;font-style:italic}caption{text-align:left;color:#555;padding:.3em 0}
.note{background:#fff6d5;border-left:4px solid #e0b400;padding:.4em .8em}
.charts{display:flex;flex-wrap:wrap;gap:1em}svg.chart{background:#fff;border:1px solid #ddd}
footer{color:#777;font-size:.8em;padding:1em 1.5em}code{font-size:.9em}
figure{margin:0}figcaption{color:#555;font-size:.85em;padding:.2em}
"""


def page(name: str, title: str, body: Iterable[str], notes: Sequence[str] = ()) -> str:
    """One dashboard page: nav to the three pages, the ``<h1>``, notes, then ``body``."""
    links = " ".join(
        f'<a href="/ui/{key}"{" aria-current=page" if key == name else ""}>{label}</a>'
        for key, label in PAGES
    )
    noted = "".join(f'<p class="note">{_esc(n)}</p>' for n in notes)
    read = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>autofe · {_esc(title)}</title>'
        f"<style>{CSS}</style></head><body><nav>{links}</nav><main><h1>{_esc(title)}</h1>"
        f"{noted}{''.join(body)}</main><footer>autofe {_esc(__version__)} · read {read} · "
        "read-only</footer></body></html>"
    )


def login_page(wrong: bool = False) -> str:
    """The token form (``POST /ui/login``); ``wrong``: the last token given did not match."""
    message = (
        '<p class="note">That token does not match.</p>'
        if wrong
        else "<p>This server needs its API token (<code>AUTOFE_API_TOKEN</code>).</p>"
    )
    form = (
        '<form method="post" action="/ui/login"><label>Token '
        '<input type="password" name="token" autocomplete="current-password" required '
        'autofocus></label> <button type="submit">Sign in</button></form>'
    )
    return page("login", "Sign in", [message, form])


# ------------------------------------------------------------------------------ Model


def model_page(data: ModelData) -> str:
    """Versions, nights, promotions and the served model's features."""
    return page(
        "model",
        "Model",
        [
            _serving(data),
            "<h2>Registry versions</h2>",
            _versions(data),
            "<h2>Champion against challenger, night by night</h2>",
            _nights_chart(data),
            _nights(data),
            "<h2>Promotion history</h2>",
            _promotions(data),
            "<h2>Features of the served model</h2>",
            _importance_charts(data),
            _catalog(data),
        ],
        data.notes,
    )


def _serving(data: ModelData) -> str:
    if data.active is None:
        return (
            f"<p>No model is active yet ({NO_DATA}): <code>autofe nightly</code> promotes one.</p>"
        )
    parts = [f"<p>Active version <b>{_esc(data.active)}</b>, serving <b>{_esc(data.serving)}</b>."]
    if data.reload_error:
        parts.append(f' <span class="note">{_esc(data.reload_error)}</span>')
    if data.holdout:
        h = data.holdout
        parts.append(
            f" Holdout of the served model: MAPE {_pct(h.get('mape'))}, median APE "
            f"{_pct(h.get('median_ape'))}, log-R² {_num(h.get('r2'))}, within 20 % "
            f"{_pct(h.get('within_20'))} ({_num(h.get('n'), '{:.0f}')} runs)."
        )
    return "".join(parts) + "</p>"


def _versions(data: ModelData) -> str:
    rows: list[Row] = [
        (
            {"data-version": v.name, **({"class": "active"} if v.active else {})},
            [
                _esc(v.name + (" (active)" if v.active else "")),
                _esc(v.created),
                *(_numcell(_pct(v.headline.get(k))) for k in ("mape", "median_ape")),
                _numcell(_num(v.headline.get("r2"))),
                *(_numcell(_pct(v.headline.get(k))) for k in ("within_20", "coverage_80")),
                _numcell(_num(v.features, "{:.0f}")),
                _esc(v.nightly or ""),
            ],
        )
        for v in reversed(data.versions)
    ]
    heads = ["version", "created", "MAPE", "median APE", "log-R²", "within 20 %", "80 % coverage"]
    return table("versions", [*heads, "features", "nightly run"], rows)


def _nights_chart(data: ModelData) -> str:
    nights = [n for n in data.nights if n.started is not None]

    def series(name: str, values: list[float | None]) -> Series:
        kept = [(n.started or 0.0, v) for n, v in zip(nights, values, strict=True) if v is not None]
        return Series(name, [t for t, _ in kept], [v for _, v in kept], style="line")

    chart = chart_svg(
        [
            series("challenger", [n.challenger_mape for n in nights]),
            series("champion (refit)", [n.champion_mape for n in nights]),
            series("champion (deployed)", [n.deployed_mape for n in nights]),
        ],
        title="Champion and challenger MAPE on each night's window",
        x_label="night",
        y_label="MAPE",
        x_time=True,
        y_format="{:.0%}",
        width=900,
    )
    return with_id(chart, "nights-chart")


def _nights(data: ModelData) -> str:
    rows: list[Row] = [
        (
            {"data-night": n.stamp},
            [
                _esc(n.stamp),
                _esc(n.status),
                _esc(n.decision or ""),
                _numcell(_pct(n.challenger_mape)),
                _numcell(_pct(n.champion_mape)),
                _numcell(_pct(n.deployed_mape)),
                _esc(n.version or ""),
                _esc(n.reason),
            ],
        )
        for n in reversed(data.nights)
    ]
    heads = ["night", "status", "decision", "challenger MAPE", "champion MAPE", "deployed MAPE"]
    return table("nights", [*heads, "version after", "reason"], rows)


def _promotions(data: ModelData) -> str:
    rows: list[Row] = [
        (
            {"class": "active"} if d.get("decision") == "promoted" else {},
            [
                _esc(d.get("at", "")),
                _esc(d.get("decision", "")),
                _esc(d.get("version") or ""),
                _esc(d.get("previous") or ""),
                _esc(d.get("nightly") or ""),
                _esc(d.get("reason", "")),
            ],
        )
        for d in data.history
    ]
    heads = ["at", "decision", "version", "previous", "nightly run", "reason"]
    return table("promotions", heads, rows)


def _importance_charts(data: ModelData) -> str:
    top = [f for f in data.features if f.importance is not None][:20]
    by_category: dict[str, float] = {}
    for f in data.features:
        by_category[f.category] = by_category.get(f.category, 0.0) + (f.importance or 0.0)
    ordered = sorted(by_category.items(), key=lambda kv: -kv[1])
    features = bars_svg(
        [f.name for f in top],
        [f.importance or 0.0 for f in top],
        title="Share of split gain, top 20 features",
    )
    categories = bars_svg(
        [c for c, _ in ordered], [v for _, v in ordered], title="Share of split gain by category"
    )
    return (
        f'<div class="charts"><figure>{with_id(features, "importance-chart")}<figcaption>'
        "Share of split gain, top 20 features</figcaption></figure><figure>"
        f"{with_id(categories, 'category-chart')}<figcaption>Share of split gain by category"
        "</figcaption></figure></div>"
    )


def _catalog(data: ModelData) -> str:
    rows: list[Row] = [
        (
            {"data-feature": f.name},
            [
                _esc(f.name),
                _esc(f.category),
                _esc(f.value_type),
                _esc(f.gate),
                _numcell(_pct(f.importance)),
                _esc(", ".join(f.kb_refs)),
                _esc(f.description),
            ],
        )
        for f in data.features
    ]
    heads = ["feature", "category", "type", "gates", "share of gain", "KB references", "why"]
    caption = "Gates: every feature of a registered model passed completeness and leakage."
    return table("catalog", heads, rows, caption)


# ------------------------------------------------------------------------ Predictions


def predictions_page(data: PredictionsData) -> str:
    """Actuals against predictions, rolling scores with alert levels, drift per job."""
    return page(
        "predictions",
        "Predictions",
        [
            _actuals_summary(data),
            _actuals_chart(data),
            _rolling_chart(data),
            "<h2>Latest actuals</h2>",
            _latest_actuals(data),
            "<h2>Drift per job (latest nightly run)</h2>",
            _drift_jobs(data),
            "<h2>Feature drift (PSI, latest nightly run)</h2>",
            _drift_features(data),
        ],
        data.notes,
    )


def _actuals_summary(data: PredictionsData) -> str:
    tail = data.tail
    if not tail.actuals:
        return f"<p>No actuals reported yet ({NO_DATA}): <code>POST /v1/actuals</code>.</p>"
    mape = tail.rolling.mape[-1] if tail.rolling.mape else None
    coverage = tail.rolling.coverage_80[-1] if tail.rolling.coverage_80 else None
    alert = "" if data.mape_alert is None else f" (alert above {_pct(data.mape_alert)})"
    return (
        f"<p>{tail.lines:,} line(s) in actuals.jsonl; the latest {len(tail.actuals):,} drawn, "
        f"{tail.matched:,} of them with this server's prediction. Over the last "
        f"{data.window} matched: MAPE <b>{_pct(mape)}</b>{alert}, 80 % interval coverage "
        f"<b>{_pct(coverage)}</b> (alert below {_pct(data.coverage_alert)}).</p>"
    )


def _actuals_chart(data: PredictionsData) -> str:
    actuals = data.tail.actuals
    bounded = [a for a in actuals if a.p50_s is not None and a.low_80 is not None]
    bare = [a for a in actuals if a.p50_s is not None and a.low_80 is None]
    series = [
        Series("actual", [a.at for a in actuals], [a.duration_s for a in actuals]),
        Series(
            "p50, 80 % interval",
            [a.at for a in bounded],
            [a.p50_s or math.nan for a in bounded],
            [a.low_80 or math.nan for a in bounded],
            [a.high_80 or math.nan for a in bounded],
        ),
    ]
    if bare:
        series.append(
            Series(
                "p50 (no interval kept)",
                [a.at for a in bare],
                [a.p50_s or math.nan for a in bare],
            )
        )
    chart = chart_svg(
        series,
        title="Reported actuals against their predictions",
        x_label="finished (UTC)",
        y_label="duration (s, log)",
        log_y=True,
        x_time=True,
        width=900,
    )
    return with_id(chart, "actuals-chart")


def _rolling_chart(data: PredictionsData) -> str:
    rolling = data.tail.rolling
    lines = [(data.coverage_alert, f"coverage alert {_pct(data.coverage_alert)}")]
    if data.mape_alert is not None:
        lines.append((data.mape_alert, f"MAPE alert {_pct(data.mape_alert)}"))
    chart = chart_svg(
        [
            Series("MAPE", rolling.at, rolling.mape, style="line"),
            Series("80 % coverage", rolling.coverage_at, rolling.coverage_80, style="line"),
        ],
        title=f"Rolling MAPE and 80 % interval coverage over the last {data.window} actuals",
        x_label="finished (UTC)",
        y_label="share",
        x_time=True,
        hlines=lines,
        y_format="{:.0%}",
        width=900,
    )
    return with_id(chart, "rolling-chart")


def _latest_actuals(data: PredictionsData) -> str:
    rows: list[Row] = [
        (
            {"data-run": a.run_id},
            [
                _esc(_time(a.at)),
                _esc(a.run_id),
                _esc(a.job_id),
                _numcell(_num(a.duration_s, "{:,.1f}")),
                _numcell(_num(a.p50_s, "{:,.1f}")),
                _numcell(_interval(a.low_80, a.high_80)),
                _numcell(_pct(abs(a.p50_s - a.duration_s) / a.duration_s if a.p50_s else None)),
                _esc(a.model_version or ""),
            ],
        )
        for a in reversed(data.tail.actuals[-20:])
    ]
    heads = ["finished", "run", "job", "actual s", "predicted p50 s", "80 % interval s"]
    return table("actuals", [*heads, "APE", "model"], rows)


def _drift_jobs(data: PredictionsData) -> str:
    drift = data.drift
    caption = (
        f"Flagged (the drift trigger): new-run MAPE at least "
        f"{data.settings.drift_change * 100:.0f} points above the training-era holdout MAPE, "
        f"on at least {data.settings.drift_runs} new runs."
    )
    if drift is not None:
        caption = (
            f"Night {drift.stamp}: champion trained through {drift.trained_through}; "
            f"{drift.era_runs} training-era runs, {drift.new_runs} new. {caption}"
        )
    rows: list[Row] = [
        (
            {"data-job": str(j.get("job_id", "")), **({"class": "alert"} if j["alert"] else {})},
            [
                _esc(j.get("job_id", "")),
                _esc(j.get("job_name", "")),
                _numcell(_pct(j.get("holdout_mape"))),
                _numcell(_num(j.get("holdout_runs"), "{:.0f}")),
                _numcell(_pct(j.get("new_mape"))),
                _numcell(_num(j.get("new_runs"), "{:.0f}")),
                _numcell(_signed_pct(j.get("change"))),
            ],
        )
        for j in (drift.jobs if drift else ())
    ]
    heads = ["job", "name", "holdout MAPE", "runs", "new-run MAPE", "new runs", "change"]
    return table("drift", heads, rows, caption)


def _drift_features(data: PredictionsData) -> str:
    moderate, shifted = PSI_LEVELS
    rows: list[Row] = [
        (
            {"class": "alert"} if f.get("level") == "shifted" else {},
            [
                _esc(f.get("feature", "")),
                _numcell(_num(f.get("psi"), "{:.3f}")),
                _esc(f.get("level") or ""),
            ],
        )
        for f in (data.drift.features if data.drift else ())
    ]
    caption = f"PSI below {moderate:g}: stable; above {shifted:g}: shifted (flagged)."
    return table("feature-drift", ["feature", "PSI", "level"], rows, caption)


# -------------------------------------------------------------------------- Scheduler


def scheduler_page(data: SchedulerData) -> str:
    """The queue, every shown handle, budgets with their projection, and the latest events."""
    snapshot = data.snapshot
    return page(
        "scheduler",
        "Scheduler",
        [
            "<h2>Jobs by state</h2>",
            _states(snapshot),
            "<h2>Spend against budget, this period</h2>",
            _spend_chart(data.budgets),
            _budgets(data.budgets),
            "<h2>Jobs</h2>",
            _jobs(snapshot),
            "<h2>Events</h2>",
            _events(snapshot),
        ],
        data.notes,
    )


def _states(snapshot: Snapshot | None) -> str:
    counts = snapshot.by_state if snapshot else {}
    rows: list[Row] = [
        ({"data-state": s}, [_esc(s), _numcell(f"{n:,}")]) for s, n in counts.items()
    ]
    total = f"{snapshot.total:,} jobs in the store" if snapshot else "no job submitted"
    return table("states", ["state", "jobs"], rows, total)


def _spend_chart(budgets: Sequence[BudgetPeriod]) -> str:
    """Each budget's spend as a share of it, so budgets of any size share one axis and one
    line at 100 %; each line goes on from now to its projection at the period's end."""
    series = [
        Series(
            b.name,
            [*(t for t, _ in b.curve), b.end],
            [*(v / b.usd for _, v in b.curve), b.projected_usd / b.usd],
            style="line",
        )
        for b in budgets
        if b.usd > 0
    ]
    chart = chart_svg(
        series,
        title="Spend in each budget's current period, then its projection to the period's end",
        x_label="time (UTC); the last segment of each line is the projection",
        y_label="share of budget",
        x_time=True,
        hlines=[(1.0, "budget")] if series else [],
        y_format="{:.0%}",
        width=900,
    )
    return with_id(chart, "spend-chart")


def _budgets(budgets: Sequence[BudgetPeriod]) -> str:
    rows: list[Row] = [
        (
            {"data-budget": b.name, **({"class": "alert"} if b.projected_usd > b.usd else {})},
            [
                _esc(b.name),
                _numcell(_usd(b.usd)),
                _esc(f"{_time(b.start)} to {_time(b.end)}"),
                _numcell(_pct(b.share_elapsed)),
                _numcell(_usd(b.spent_usd)),
                _numcell(_pct(b.spent_usd / b.usd if b.usd else None)),
                _numcell(_usd(b.projected_usd)),
                _esc("over" if b.projected_usd > b.usd else "within"),
            ],
        )
        for b in budgets
    ]
    heads = ["budget", "USD", "period", "elapsed", "spent", "of budget", "projected", "projection"]
    caption = (
        "Projected: spent so far, running jobs at their current price until their predicted "
        "completion, and queued jobs' planned cost when they are predicted to finish this period."
    )
    return table("budgets", heads, rows, caption)


def _jobs(snapshot: Snapshot | None) -> str:
    jobs = snapshot.jobs if snapshot else ()
    caption = f"The latest {len(jobs):,} of {snapshot.total:,} jobs." if snapshot else None
    heads = ["handle", "job", "account", "tier", "state", "plan", "market"]
    heads += ["spend", "planned cost", "P(deadline)", "submitted", "predicted completion"]
    return table(
        "jobs", [*heads, "preempted / fallbacks / upgrades"], [_job(j) for j in jobs], caption
    )


def _job(j: JobRecord) -> Row:
    p = j.plan.placement
    return (
        {"data-handle": j.handle, "data-state": j.state},
        [
            f'<code title="{_esc(j.handle)}">{_esc(j.handle[:12])}</code>',
            _esc(j.job_id),
            _esc(j.account),
            _esc(j.tier),
            _esc(j.state),
            _esc(f"{p.shape.key} on {p.cloud}/{p.region}"),
            _esc(p.market),
            _numcell(_usd(j.spend_usd)),
            _numcell(_usd(j.plan.expected_cost_usd)),
            _numcell(_num(j.plan.p_deadline, "{:.3f}")),
            _esc(_time(j.submitted_at)),
            _esc(_time(j.predicted_completion)),
            _numcell(f"{j.preemptions} / {j.fallbacks} / {j.upgrades}"),
        ],
    )


def _events(snapshot: Snapshot | None) -> str:
    events = snapshot.events if snapshot else ()
    rows: list[Row] = [
        (
            {"data-kind": e.event.kind},
            [
                _esc(_time(e.event.at)),
                f'<code title="{_esc(e.handle)}">{_esc(e.handle[:12])}</code>',
                _esc(e.job_id),
                _esc(e.event.kind),
                _esc(", ".join(f"{k}: {v}" for k, v in sorted(e.event.detail.items()))),
            ],
        )
        for e in events
    ]
    kinds = snapshot.events_by_kind if snapshot else {}
    caption = (
        f"The latest {len(events):,} events; all of them by kind: "
        + ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items()))
        if kinds
        else None
    )
    return table("events", ["at", "handle", "job", "kind", "detail"], rows, caption)


# ---------------------------------------------------------------------------- helpers


def table(
    table_id: str, heads: Sequence[str], rows: Sequence[Row], caption: str | None = None
) -> str:
    """A table with one ``<tr>`` per row (its attributes kept), or one "no data yet" row."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in heads)
    body = "".join(f"<tr{_attrs(attrs)}>{''.join(map(_td, cells))}</tr>" for attrs, cells in rows)
    if not rows:
        body = f'<tr class="empty"><td colspan="{len(heads)}">{NO_DATA}</td></tr>'
    cap = f"<caption>{_esc(caption)}</caption>" if caption else ""
    return (
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def with_id(svg: str, element_id: str) -> str:
    """The chart with an ``id`` on its ``<svg>`` element (what the page contract names).

    >>> with_id('<svg class="chart" role="img"></svg>', "a")
    '<svg id="a" class="chart" role="img"></svg>'
    """
    return svg.replace("<svg ", f'<svg id="{element_id}" ', 1)


def _attrs(attrs: Mapping[str, str]) -> str:
    return "".join(f' {k}="{_esc(v)}"' for k, v in attrs.items())


def _td(cell: str) -> str:
    """A cell made by :func:`_numcell` already is one; anything else is wrapped."""
    return cell if cell.startswith("<td") else f"<td>{cell}</td>"


def _numcell(text: str) -> str:
    return f'<td class="num">{text}</td>'


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, pattern: str = "{:.3f}") -> str:
    """
    >>> _num(0.12345), _num(None), _num(float("nan"))
    ('0.123', '–', '–')
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "–"
    return _esc(pattern.format(value))


def _pct(value: Any) -> str:
    return _num(value, "{:.1%}")


def _signed_pct(value: Any) -> str:
    return _num(value, "{:+.1%}")


def _usd(value: Any) -> str:
    return _num(value, "${:,.2f}")


def _interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "–"
    return f"{_num(low, '{:,.1f}')} – {_num(high, '{:,.1f}')}"


def _time(seconds: float | None) -> str:
    """
    >>> _time(0.0), _time(None)
    ('1970-01-01 00:00:00', '–')
    """
    if seconds is None or not math.isfinite(seconds):
        return "–"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
