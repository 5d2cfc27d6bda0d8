"""The cost gate: its latency, its seconds-per-row constant, and its projections against
measured times on a larger history.

Run: ``.venv/bin/python benchmarks/cost_gate.py [--db WAREHOUSE] [--at BIGGER_WAREHOUSE]
[--catalog tests/fixtures/catalogs/ex8] [--write docs/results.md]``

- ``--db``: the warehouse the gate judges on (default: the shipped example, ingested into a
  temporary folder). Every feature of ``--catalog`` goes through ``check_cost`` (its wall
  time, the sample build included for the first), then runs once through the sandbox on the
  whole warehouse: its plain query time and its work in rows (``plan_work`` of a profiled
  run). The constant ``SECONDS_PER_ROW`` should be near the total time over the total work.
- ``--at``: a larger warehouse (``autofe warehouse replicate``). Each feature the gate admits
  is timed there (the sandbox's production limits but a 600 s timeout) beside what the gate
  projected for that many runs from ``--db``'s samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from report import machine, percentile, write_section

from autofe.config import IngestSettings, example_workspace
from autofe.feature_catalog import load_catalog
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.cost import SECONDS_PER_ROW, Growth, check_cost, feature_growth
from autofe.gates.cost_sample import cost_samples
from autofe.ingest.ingest import ingest
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import LimitExceeded, Sandbox
from autofe.sandbox.work import plan_work


@dataclasses.dataclass
class Row:
    name: str
    gate_s: float
    refused: list[str]
    growth: Growth
    query_s: float
    work: int
    at_s: float | None = None
    at_projected_s: float | None = None


def judge(specs: list[FeatureSpec], db: Path) -> tuple[list[Row], int]:
    ctx = GateContext.load(db)
    s = ctx.settings
    rows = []
    with Sandbox.open(db, s.limits) as box:
        for spec in specs:
            started = time.perf_counter()
            reasons = check_cost(spec, ctx)
            gate_s = time.perf_counter() - started
            samples = cost_samples(
                db, ctx.catalog, s.cost_sample_shares, s.cost_sample_cap, s.limits
            )
            growth = feature_growth(spec, samples)
            started = time.perf_counter()
            box.query(spec.sql)
            query_s = time.perf_counter() - started
            work = plan_work(box.profile(spec.sql))
            rows.append(Row(spec.name, gate_s, [r.code for r in reasons], growth, query_s, work))
    return rows, samples.warehouse_runs


def time_at(rows: list[Row], specs: list[FeatureSpec], at: Path) -> int:
    limits = dataclasses.replace(SandboxLimits(), timeout_s=600.0, max_rows=50_000_000)
    by_name = {s.name: s for s in specs}
    with Sandbox.open(at, limits) as box:
        runs = int(box.query("SELECT count(*) FROM runs").rows[0][0])
        for row in rows:
            if row.refused:
                continue
            started = time.perf_counter()
            try:
                box.query(by_name[row.name].sql)
                row.at_s = time.perf_counter() - started
            except LimitExceeded:
                row.at_s = float("inf")
            row.at_projected_s = row.growth.work_at(runs) * SECONDS_PER_ROW
    return runs


def markdown(rows: list[Row], runs: int, args: argparse.Namespace, at_runs: int | None) -> str:
    gate = [r.gate_s for r in rows]
    total_s, total_w = sum(r.query_s for r in rows), sum(r.work for r in rows)
    refused = [r for r in rows if r.refused]
    lines = [
        f"Command: `.venv/bin/python benchmarks/cost_gate.py{_args(args)}`.",
        f"Machine: {machine()}.",
        f"Warehouse: {runs:,} runs; catalog `{args.catalog}` ({len(rows)} features).",
        "",
        "| cost gate per feature | p50 s | p90 s | max s |",
        "|---|---|---|---|",
        f"| wall time (samples built in the first) | {percentile(gate, 0.5):.3f} | "
        f"{percentile(gate, 0.9):.3f} | {max(gate):.3f} |",
        "",
        f"Refused: {len(refused)} of {len(rows)}: "
        + ", ".join(f"`{r.name}` n^{r.growth.exponent:.1f}{_axis(r.growth)}" for r in refused)
        + ".",
        f"Whole warehouse: {total_s:.2f} s for {total_w:,} rows of work = "
        f"{total_s / max(total_w, 1):.2e} s per row (the gate's constant: {SECONDS_PER_ROW:.1e}).",
    ]
    if at_runs is not None:
        timed = [r for r in rows if r.at_s is not None]
        lines += [
            "",
            f"At {at_runs:,} runs (`--at`), the admitted features, slowest first:",
            "",
            "| feature | growth | projected s | measured s |",
            "|---|---|---|---|",
            *(
                f"| `{r.name}` | n^{r.growth.exponent:.2f} | {r.at_projected_s:.2f} "
                f"| {r.at_s:.2f} |"
                for r in sorted(timed, key=lambda r: -(r.at_s or 0))[:12]
            ),
            "",
            f"Total: projected {sum(r.at_projected_s or 0 for r in timed):.1f} s, "
            f"measured {sum(r.at_s or 0 for r in timed):.1f} s over {len(timed)} features.",
        ]
    return "\n".join(lines) + "\n"


def _axis(growth: Growth) -> str:
    return " (job history)" if growth.depth else ""


def _args(args: argparse.Namespace) -> str:
    out = ""
    for name in ("db", "at", "catalog"):
        value = getattr(args, name)
        if value is not None and not (name == "catalog" and value == CATALOG):
            out += f" --{name} {value}"
    return out


CATALOG = Path("tests/fixtures/catalogs/ex8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--at", type=Path)
    parser.add_argument("--catalog", type=Path, default=CATALOG)
    parser.add_argument("--write", type=Path, help="update this results file's cost-gate section")
    args = parser.parse_args()
    specs = load_catalog(args.catalog)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "example.duckdb"
            ingest([example_workspace()], IngestSettings(db=db, workers=1))
        rows, runs = judge(specs, db)
    at_runs = time_at(rows, specs, args.at) if args.at else None
    body = markdown(rows, runs, args, at_runs)
    print(body)
    if args.write:
        write_section(args.write, "cost-gate", body)


if __name__ == "__main__":
    main()
