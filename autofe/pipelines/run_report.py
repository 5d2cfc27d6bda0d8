"""``report.html`` of a run: what a user looks at first, before any JSON.

At the top the holdout score beside the best simple baseline's and why the loop stopped; then
predicted against actual for every holdout run, the error by job (worst first), the baselines'
table, the per-round curves, the kept features by category with the knowledge-base documents
they came from, the rejections, and what the LLM backend did.

The page is self-contained and works offline: charts are inline SVG (:mod:`autofe.svg`), styles
inline, no script and no external URL, so it can be mailed or opened from an archive. It is
written from files the run directory keeps (``metrics.json``, ``holdout.json``,
``settings.json``, the warehouse for job names) and the final state's kept features, so
``autofe run --resume`` on a finished run writes it again; a record an older run lacks becomes
a sentence saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autofe.agents.state import STOP_WORDS, Feature
from autofe.errors import AutofeError
from autofe.knowledge_base.corpus import CORPUS_DIR, parse_document
from autofe.pipelines import run_report_sections as sections
from autofe.pipelines.run_report_loop import iterations, kept_features, llm_section, pruning
from autofe.pipelines.run_report_sections import esc, p, table
from autofe.run_dir import RunDir
from autofe.sandbox.session import Sandbox
from autofe.workspace_archive import COMPLETE_MARKER

STYLE = (
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "td,th{padding:2px 8px;text-align:left}tr:nth-child(even){background:#f6f6f6}"
    ".headline{border:2px solid #1f77b4;border-radius:6px;padding:0.5em 1em;background:#f3f8fc}"
    ".headline table td:nth-child(2){font-weight:bold}.partial{color:#b35900;font-weight:bold}"
    "tr.model{background:#dbe9f6;font-weight:bold}tr.best{background:#fdf2d0}"
    "figure{margin:0.5em 0}.sub{color:#666}"
)
PARTIAL = ("budget_seconds", "budget_tokens")
"""Stop reasons that cut the loop short: the model is what the budget allowed."""
_HASHED = re.compile(r"^(?P<name>.+)-[0-9a-f]{16}$")
_DOC_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def write_run_report(out: Path, metrics: dict[str, Any], kept: Sequence[Feature]) -> Path:
    """Write the run's ``report.html`` from its run directory and kept features; return it."""
    page = RunDir(out).report
    page.write_text(report_page(out, metrics, kept), encoding="utf-8")
    return page


def report_page(out: Path, metrics: Mapping[str, Any], kept: Sequence[Feature]) -> str:
    """The whole page as one HTML string."""
    name = workspace_name(out)
    rows = holdout_rows(out)
    names = job_names(out) if rows else {}
    refs = {r for k in kept for r in k["kb_refs"]}
    rejected = metrics["rejected_by_stage"]
    parts = [
        f"<h1>{esc(name)}: autofe run</h1>",
        f'<p class="sub">Run folder {esc(out.name)}: {metrics["proposed"]} candidates '
        f"proposed, {metrics['accepted']} accepted, {metrics['seconds']:.0f} s, "
        f"{metrics['tokens']} LLM tokens.</p>",
        '<section class="headline" id="headline">',
        *sections.headline(metrics),
        *stop_sentences(metrics.get("stop_reason"), metrics.get("partial_reasons")),
        *sample_sentences(metrics.get("sample")),
        "</section>",
        "<h2>Predicted vs actual on the holdout</h2>",
        *sections.predicted_vs_actual(rows),
        "<h2>Error by job, worst first</h2>",
        *sections.by_job(rows, names),
        "<h2>The model beside the simple baselines (same holdout runs)</h2>",
        *sections.baselines(metrics),
        "<h2>Rounds (CV on the runs before the holdout)</h2>",
        *iterations(metrics["iterations"]),
        *pruning(metrics.get("pruning")),
        "<h2>Kept features by category</h2>",
        *kept_features(kept, kb_titles(refs)),
        "<h2>Rejected by stage</h2>",
        table(["stage", "candidates"], [[k, str(v)] for k, v in rejected.items()]),
        *llm_section(metrics.get("llm") or {}),
    ]
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(name)}: autofe run</title><style>{STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def sample_sentences(sample: Mapping[str, Any] | None) -> list[str]:
    """What the loop scored on, when the history was too large for every run.

    >>> sample_sentences({"runs": 20083, "of_runs": 100450, "jobs": 1012, "of_jobs": 5125,
    ...     "strata": 10})[0][:60]
    '<p>The rounds scored candidates on a sample of 20,083 of the'
    """
    if not sample:
        return []
    return [
        f"<p>The rounds scored candidates on a sample of {sample['runs']:,} of the "
        f"{sample['of_runs']:,} runs: {sample['jobs']:,} of {sample['of_jobs']:,} jobs, each "
        f"whole, drawn evenly from {sample['strata']} groups by first submission and, within "
        "each, by the code the jobs run, so the sample spans the history and holds every kind "
        "of job in its share. The final features were then computed on every run; the holdout, the "
        "baselines and the model are the whole history's.</p>"
    ]


def stop_sentences(reason: str | None, partial: Sequence[str] | None = None) -> list[str]:
    """Why the loop stopped, in words, and whether the result is partial and why.

    ``partial`` is ``metrics.json``'s ``partial_reasons`` (a budget stop, features refused by
    a time limit); a run written before it existed is partial when a budget stopped it.

    >>> stop_sentences("max_iterations", [])[1]
    '<p>The result is complete: the rounds asked for decided it, no budget or time limit.</p>'
    >>> "2 features refused" in stop_sentences("max_iterations", ["2 features refused"])[1]
    True
    """
    words = f"{reason} ({STOP_WORDS[reason]})" if reason in STOP_WORDS else str(reason)
    why = list(partial) if partial is not None else [words] if reason in PARTIAL else []
    if why:
        verdict = (
            '<p class="partial">Partial result: '
            + esc("; ".join(why))
            + ". The model is what the budget or limit allowed, not what the rounds asked for "
            "would keep; a larger budget or a less loaded machine may keep more features.</p>"
        )
    else:
        verdict = p(
            "The result is complete: the rounds asked for decided it, no budget or time limit."
        )
    return [p(f"Stopped: {words}."), verdict]


def workspace_name(out: Path) -> str:
    """The name of the workspace the run read (from ``settings.json``), else the run folder's.

    An unpacked example archive lives in ``<cache>/<name>-<16 hex digits of its hash>/``; the
    hash is the cache's business, not the workspace's name.
    """
    try:
        settings = json.loads(RunDir(out).settings.read_text(encoding="utf-8"))
        folder = Path(str(settings["workspace"]))
    except (OSError, ValueError, KeyError, TypeError):
        return out.name
    hashed = _HASHED.match(folder.name)
    if hashed and (folder / COMPLETE_MARKER).is_file():
        return hashed["name"]
    return folder.name or out.name


def holdout_rows(out: Path) -> list[dict[str, Any]] | None:
    """``holdout.json``'s runs (None when the run directory has none or it is unreadable)."""
    try:
        runs = json.loads(RunDir(out).holdout_predictions.read_text(encoding="utf-8"))["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return runs if isinstance(runs, list) else None


def job_names(out: Path) -> dict[str, str]:
    """Job id → name from the run's warehouse (empty when it cannot be read: ids then serve)."""
    try:
        with Sandbox.open(RunDir(out).warehouse) as sandbox:
            rows = sandbox.query("SELECT job_id, name FROM jobs").rows
    except AutofeError:
        return {}
    return {str(job): str(name) for job, name in rows if name}


def kb_titles(refs: set[str]) -> dict[str, str]:
    """The title of each cited knowledge-base document (a ref naming none is left out)."""
    titles = {}
    for ref in sorted(refs):
        path = CORPUS_DIR / f"{ref}.md"
        if not _DOC_ID.match(ref) or not path.is_file():
            continue
        try:
            titles[ref] = parse_document(path).title
        except AutofeError:
            continue
    return titles
