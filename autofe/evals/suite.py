"""The evaluation suite: the report on the example workspace, the protocols on third-party data.

One command (``autofe eval suite --out DIR``) ingests everything from its source, so the numbers
in ``docs/results.md`` can be reproduced on a clean checkout:

1. the shipped example workspace → ``DIR/example/report.{md,html}`` (manual features, plus
   generated ones when ``--generated`` names a catalog or run directory);
2. C3O, Scout and CherryPick through their mapping files → both protocols with LightGBM on the
   raw columns, and on the raw columns plus the node-type facts ingest fills in (vCPU, memory,
   price of the machine type: what a model needs to say anything about unseen hardware); with
   ``--generated-dir``, the catalog of ``autofe run`` on each dataset, whole and restricted to
   the features that read no run's outcome (:func:`autofe.evals.masked.submit_time_only`);
3. configuration choice on Scout and CherryPick at a deadline of 1.5 × each job's fastest
   true runtime.

Every number stands beside the simple baselines on the same runs (the example's holdout; the
protocols' folds, :func:`autofe.evals.protocols.evaluate_baselines`), and each generated row is
judged against the best of them, the raw-column sets included (:func:`judgements`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autofe.config import IngestSettings, example_workspace
from autofe.evals.choice import config_choice_options, generated_choice_options
from autofe.evals.cost import PolicyResult, compare_policies
from autofe.evals.masked import submit_time_only
from autofe.evals.protocols import (
    CLUSTER_COLUMNS,
    PROTOCOLS,
    ProtocolResult,
    evaluate_baselines,
    evaluate_generated,
    evaluate_protocols,
    raw_values,
)
from autofe.evals.render import write_report
from autofe.evals.report import Report, best_reference, build_report, verdict
from autofe.feature_catalog import read_feature_set
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.ingest.run_table.mapping import load_mapping
from autofe.run_dir import RunDir

MAPPINGS = Path(__file__).resolve().parents[2] / "examples" / "mappings"
DATASETS = ("c3o", "scout-multinode", "cherrypick")
COST_DATASETS = ("scout-multinode", "cherrypick")
SUBMIT_TIME = "generated, submit-time only"
"""The generated features that read no run's outcome: the set for hardware a job never ran on."""


@dataclass
class SuiteResult:
    """What the suite measured, for the results table."""

    report: Report
    protocols: list[ProtocolResult] = field(default_factory=list)
    choice: dict[str, list[PolicyResult]] = field(default_factory=dict)


def run_suite(
    out: Path,
    feature_sets: Mapping[str, Sequence[FeatureSpec]],
    mappings: Path = MAPPINGS,
    datasets: Sequence[str] = DATASETS,
    example_db: Path | None = None,
    generated_dir: Path | None = None,
) -> SuiteResult:
    """Run every part; write the example report and ``results.md`` into ``out``.

    ``example_db``: an already ingested example warehouse (default: ingest it into ``out``).
    ``generated_dir``: run directories of ``autofe run`` on the datasets' mappings, one per
    dataset name (``generated_dir/c3o`` ...); their feature catalogs are scored under both
    protocols with the held-out runs' outcomes hidden (:mod:`autofe.evals.masked`).
    """
    out.mkdir(parents=True, exist_ok=True)
    if example_db is None:
        example_db = out / "example.duckdb"
        ingest([example_workspace()], IngestSettings(db=example_db))
    report = build_report(example_db, feature_sets)
    write_report(report, out / "example")
    result = SuiteResult(report)
    for name in datasets:
        catalog = RunDir(generated_dir / name).features if generated_dir else None
        _score_dataset(result, name, mappings / f"{name}.toml", out / f"{name}.duckdb", catalog)
    (out / "results.md").write_text(results_markdown(result), encoding="utf-8")
    return result


def _score_dataset(
    result: SuiteResult, name: str, mapping: Path, db: Path, catalog: Path | None
) -> None:
    """Ingest one third-party dataset; score its feature sets under the protocols and, for the
    cost datasets, choose configurations by each set's predictions (into ``result``)."""
    ingest([mapping], IngestSettings(db=db))
    fields = [f for f in load_mapping(mapping).spec.cluster.fields() if f in CLUSTER_COLUMNS]
    sets = {
        "raw columns": raw_values(db, fields),
        "raw + node-type facts": raw_values(db, CLUSTER_COLUMNS),
    }
    result.protocols += evaluate_baselines(db, name)
    result.protocols += [replace(r, baseline=True) for r in evaluate_protocols(db, name, sets)]
    if name in COST_DATASETS:
        for label, values in sets.items():
            result.choice[f"{name}, {label}"] = compare_policies(config_choice_options(db, values))
    if catalog is None or not catalog.is_dir():
        return
    specs = read_feature_set(catalog)
    for label, chosen in (("generated", specs), (SUBMIT_TIME, submit_time_only(db, specs))):
        result.protocols += evaluate_generated(db, name, chosen, {label: {}})
        if name in COST_DATASETS:
            for key, options in generated_choice_options(db, chosen, {label: {}}).items():
                result.choice[f"{name}, {key}"] = compare_policies(options)


def results_markdown(result: SuiteResult) -> str:
    """The tables ``docs/results.md`` carries."""
    lines = ["### Example workspace (holdout: latest 20 % of runs)", ""]
    lines += _example_table(result.report)
    lines += ["", "Cost impact on the lab sweeps (deadline 1.5 × fastest):", ""]
    lines += _policy_table([(s.name, s.cost) for s in result.report.sets])
    lines += ["", "### Third-party datasets", ""]
    lines += [
        "| dataset | protocol | features | runs | folds | MAPE | R² | ±10 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    best = {(r.dataset, r.protocol): r for r in _best_baselines(result.protocols)}
    for r in _by_protocol(result.protocols):
        width = f"({r.n_features})" if r.n_features else "(baseline)"
        mark = " — best baseline" if best.get((r.dataset, r.protocol)) is r else ""
        lines.append(
            f"| {r.dataset} | {r.protocol} | {r.features} {width}{mark} | {r.runs} | "
            f"{r.folds} | {r.mape:.1%} | {r.r2:.3f} | {r.within_10:.0%} |"
        )
    lines += ["", "Generated features against the best baseline (MAPE):", ""]
    lines += ["| dataset | protocol | best baseline | MAPE | features | MAPE | verdict |"]
    lines += ["|---|---|---|---|---|---|---|"]
    lines += [
        f"| {b.dataset} | {b.protocol} | {b.features} | {b.mape:.1%} | {g.features} | "
        f"{g.mape:.1%} | {word} |"
        for b, g, word in judgements(result.protocols)
    ]
    lines += ["", "Configuration choice per job (grouped 5-fold predictions):", ""]
    lines += _policy_table(list(result.choice.items()))
    return "\n".join(lines) + "\n"


def _example_table(report: Report) -> list[str]:
    """The example's sets, then the simple baselines on the same holdout runs, then each set
    against the best of them and the manual set."""
    lines = [
        "| features | n | R² | MAPE | median APE | ±10 % | 80 % cover | 90 % cover |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in report.sets:
        m = s.holdout.metrics
        lines.append(
            f"| {s.name} | {len(s.specs)} | {m.r2:.3f} | {m.mape:.1%} | {m.median_ape:.1%} | "
            f"{m.within_10:.0%} | {s.holdout.coverage[0.8]:.1%} | {s.holdout.coverage[0.9]:.1%} |"
        )
    best = report.best_simple().name
    for b in report.simple:
        m, mark = b.metrics, " — best baseline" if b.name == best else ""
        lines.append(
            f"| {b.label}{mark} | – | {m.r2:.3f} | {m.mape:.1%} | {m.median_ape:.1%} | "
            f"{m.within_10:.0%} | – | – |"
        )
    lines.append("")
    for s in report.sets:
        label, ref = best_reference(report, s)
        lines.append(
            f"- {s.name} against {label} (MAPE {ref.mape:.1%}): {verdict(s.holdout.metrics, ref)}"
        )
    return lines


def _by_protocol(results: Sequence[ProtocolResult]) -> list[ProtocolResult]:
    """The rows grouped by dataset, then protocol (first-seen order), baselines first."""
    datasets = list(dict.fromkeys(r.dataset for r in results))
    protocols = [name for name, _ in PROTOCOLS]
    return sorted(
        results,
        key=lambda r: (datasets.index(r.dataset), protocols.index(r.protocol), not r.baseline),
    )


def _best_baselines(results: Sequence[ProtocolResult]) -> list[ProtocolResult]:
    """Per dataset × protocol, the baseline row with the lowest MAPE (first listed on a tie)."""
    best: dict[tuple[str, str], ProtocolResult] = {}
    for r in results:
        key = (r.dataset, r.protocol)
        if r.baseline and (key not in best or r.mape < best[key].mape):
            best[key] = r
    return list(best.values())


def judgements(
    results: Sequence[ProtocolResult],
) -> list[tuple[ProtocolResult, ProtocolResult, str]]:
    """(best baseline, feature-set row, "beats" / "ties" / "loses to") for every row that is
    not a baseline, on MAPE (a tie: within 0.05 points)."""
    best = {(r.dataset, r.protocol): r for r in _best_baselines(results)}
    found = []
    for r in results:
        b = best.get((r.dataset, r.protocol))
        if r.baseline or b is None:
            continue
        points = (b.mape - r.mape) * 100
        word = "beats" if points > 0.05 else "loses to" if points < -0.05 else "ties"
        found.append((b, r, word))
    return found


def _policy_table(groups: Sequence[tuple[str, Sequence[PolicyResult]]]) -> list[str]:
    rows = ["| set | policy | points | deadlines met | saving vs static | regret vs oracle |"]
    rows.append("|---|---|---|---|---|---|")
    for name, results in groups:
        rows += [
            f"| {name} | {r.policy} | {r.points} | {r.deadlines_met:.0%} | "
            f"{r.saving_vs_static:+.1%} | {r.regret_vs_oracle:+.1%} |"
            for r in results
        ]
    return rows
