"""``autofe eval``: measured evaluations (retrieval quality, the feature-set report)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autofe.config import DEFAULT_DB
from autofe.console import err, out, user_errors
from autofe.errors import ConfigError
from autofe.evals.manual import manual_features
from autofe.evals.retrieval.evaluate import QUERIES, evaluate, load_queries
from autofe.feature_catalog import read_feature_set
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.run_dir import RunDir

if TYPE_CHECKING:
    from autofe.evals.report import Report

eval_app = typer.Typer(help="Evaluations with measured numbers.", no_args_is_help=True)


@eval_app.command("retrieval")
@user_errors
def retrieval(
    k: Annotated[int, typer.Option("--k", help="Cut-off for recall@k.")] = 5,
    queries: Annotated[Path, typer.Option("--queries", help="Labelled queries (JSONL).")] = QUERIES,
    index: Annotated[Path | None, typer.Option("--index", help="Index directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Recall@k and MRR of dense, BM25 and hybrid search on the labelled queries."""
    kb = KnowledgeBase(index_dir=index)
    labelled = load_queries(queries, set(kb.by_id))
    scores = evaluate(kb, labelled, k)
    if as_json:
        print(
            json.dumps(
                {"queries": len(labelled), "k": k, "modes": [asdict(s) for s in scores]}, indent=2
            )
        )
        return
    out.print(f"{len(labelled)} queries, {len(kb.docs)} documents, embedder {kb.embedder.name}")
    out.print(f"{'mode':8} {'recall@' + str(k):>9} {'MRR':>6} {'hit@' + str(k):>6}")
    for s in scores:
        out.print(f"{s.mode:8} {s.recall_at_k:9.3f} {s.mrr:6.3f} {s.hit_at_k:6.3f}")


COMPARE = ("manual", "generated", "both")


@eval_app.command("report")
@user_errors
def report(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for report.md / report.html.")],
    workspace: Annotated[
        Path | None,
        typer.Argument(help="A workspace to ingest first (default: use --db as it is)."),
    ] = None,
    db: Annotated[Path, typer.Option("--db", help="Warehouse file (DuckDB).")] = DEFAULT_DB,
    generated: Annotated[
        Path | None,
        typer.Option("--generated", help="Generated features: a catalog or run directory."),
    ] = None,
    compare: Annotated[
        str, typer.Option("--compare", help="manual, generated and/or both, comma-separated.")
    ] = "manual",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compare feature sets on one warehouse: accuracy, intervals, errors, cost impact."""
    from autofe.evals.render import write_report
    from autofe.evals.report import build_report

    if workspace is not None:
        db = _ingested(workspace, out_dir)
    sets = feature_sets([c.strip() for c in compare.split(",") if c.strip()], generated)
    result = build_report(db, sets)
    md, page = write_report(result, out_dir)
    summary = {s.name: s.holdout.as_dict() for s in result.sets}
    judged = _judged(result)
    if as_json:
        baselines = [b.as_dict() for b in result.simple]
        found: dict[str, object] = {"report": str(page), "markdown": str(md), "sets": summary}
        found |= {"baselines": baselines, "best_baseline": result.best_simple().name}
        print(json.dumps(found | {"judged": judged}, indent=2))
        return
    for name, m in summary.items():
        j = judged[name]
        out.print(
            f"{name}: R² {m['r2']:.3f}, MAPE {m['mape']:.1%}, "
            f"coverage {m['coverage_80']:.0%} / {m['coverage_90']:.0%}; against "
            f"{j['reference']} (MAPE {j['mape']:.1%}): {j['verdict']}",
            highlight=False,
        )
    out.print(f"wrote {page} and {md}", highlight=False)


def _judged(result: Report) -> dict[str, dict[str, object]]:
    """Per set: the best row it must beat (baseline or manual set), its MAPE, the verdict."""
    from autofe.evals.report import best_reference, verdict

    judged: dict[str, dict[str, object]] = {}
    for s in result.sets:
        label, ref = best_reference(result, s)
        judged[s.name] = {"reference": label, "mape": round(ref.mape, 4)}
        judged[s.name]["verdict"] = verdict(s.holdout.metrics, ref)
    return judged


def feature_sets(names: list[str], generated: Path | None) -> dict[str, tuple[FeatureSpec, ...]]:
    """The named sets; ``both`` is the union of manual and generated (by feature id).

    Raises:
        ConfigError: an unknown set name, or a generated set asked for without ``--generated``.
    """
    unknown = sorted(set(names) - set(COMPARE))
    if unknown or not names:
        raise ConfigError(f"--compare takes {', '.join(COMPARE)}; got {unknown or 'nothing'}")
    if {"generated", "both"} & set(names) and generated is None:
        raise ConfigError("--compare generated/both needs --generated CATALOG_OR_RUN_DIR")
    manual = manual_features()
    gen = read_feature_set(_catalog_dir(generated)) if generated is not None else ()
    ids = {s.feature_id for s in manual}
    union = (*manual, *(s for s in gen if s.feature_id not in ids))
    available = {"manual": manual, "generated": gen, "both": union}
    return {name: available[name] for name in names}


def _catalog_dir(path: Path) -> Path:
    """A run directory holds its catalog under ``features/``."""
    catalog = RunDir(path).features
    return catalog if catalog.is_dir() else path


def _ingested(workspace: Path, out_dir: Path) -> Path:
    from autofe.config import IngestSettings
    from autofe.ingest.ingest import ingest

    db = out_dir / "warehouse.duckdb"
    ingest([workspace], IngestSettings(db=db))
    return db


@eval_app.command("suite")
@user_errors
def suite(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for warehouses and results.")],
    generated: Annotated[
        Path | None,
        typer.Option("--generated", help="Generated features for the example workspace."),
    ] = None,
    generated_dir: Annotated[
        Path | None,
        typer.Option(
            "--generated-dir",
            help="autofe run directories per third-party dataset (DIR/c3o, DIR/cherrypick...).",
        ),
    ] = None,
) -> None:
    """The example report plus the third-party protocols; writes DIR/results.md."""
    from autofe.evals.suite import results_markdown, run_suite

    names = ["manual", "generated", "both"] if generated is not None else ["manual"]
    with err.status("running the evaluation suite…"):
        result = run_suite(out_dir, feature_sets(names, generated), generated_dir=generated_dir)
    out.print(results_markdown(result), highlight=False, markup=False)


@eval_app.command("trace")
@user_errors
def trace(
    source: Annotated[str, typer.Option("--source", help="lab, c3o, scout or cherrypick.")],
    out_file: Annotated[Path, typer.Option("--out", help="Trace file to write (jobs JSON).")],
    db: Annotated[
        Path | None,
        typer.Option("--db", help="The source already ingested (default: ingest it afresh)."),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="lab: the workspace to ingest (default: the example)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seeds arrivals, tiers, accounts.")] = 0,
    slack: Annotated[
        float, typer.Option("--slack", help="Deadline: slack × (fastest true + start-up).")
    ] = 1.5,
    min_jobs: Annotated[int, typer.Option("--min-jobs", help="Replay points up to this.")] = 300,
    generated: Annotated[
        Path | None,
        typer.Option(
            "--generated",
            help="Price with this autofe run's catalog (run directory or catalog folder; "
            "third-party sources).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """A simulation trace from real runtimes: every shape's true runtime and the model's
    out-of-fold interval, replayed as a seeded stream of jobs (docs/scheduler.md, Traces)."""
    from autofe.evals.traces import TraceSettings, trace_for
    from autofe.scheduler.catalog import load_catalog
    from autofe.scheduler.jobfile import write_jobs

    settings = TraceSettings(seed=seed, slack=slack, min_jobs=min_jobs)
    specs = read_feature_set(_catalog_dir(generated)) if generated is not None else ()
    with err.status(f"building the {source} trace…"):
        jobs = trace_for(source, load_catalog(), settings, db, workspace, specs)
    write_jobs(out_file, jobs.jobs, jobs.budgets, jobs.source)
    tiers = {t: sum(j.tier == t for j in jobs.jobs) for t in ("P0", "P1", "P2", "P3")}
    summary = {
        "trace": str(out_file),
        "source": jobs.source,
        "jobs": len(jobs.jobs),
        "tiers": tiers,
        "budgets_usd": {b.name: b.usd for b in jobs.budgets},
    }
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    out.print(f"wrote {out_file}: {len(jobs.jobs)} jobs ({jobs.source})", highlight=False)
    out.print(f"tiers {tiers}; budgets {summary['budgets_usd']} USD", highlight=False)
