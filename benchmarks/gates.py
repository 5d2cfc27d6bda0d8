"""Gate latency per feature on a 10 000-run warehouse, for every leakage fixture.

Run: ``.venv/bin/python benchmarks/gates.py [--runs 10000 | --example] [--write docs/results.md]``

Builds the warehouse of ``benchmarks/warehouse_10k.py`` in a temporary directory, then runs
every ``tests/fixtures/leakage/*.sql`` feature through ``run_gates`` (the per-gate times are
the verdict's own) and, once more, through each check of the leakage gate on its own (static
lineage, dynamic perturbation). Target: leakage (static + dynamic) ≤ 1 s per feature.
Fixtures marked ``-- coverage: low`` run with ``min_coverage=0``, as in the tests.

``--example`` times the gates where the loop meets them first: the shipped example workspace
ingested into a temporary warehouse, and the 132 features of ``tests/fixtures/catalogs/ex8``
(every feature the gates admitted in one full ``autofe run`` on it), each expected to pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
from report import machine, percentile, write_section
from warehouse_10k import build_warehouse

from autofe.config import REPO_DIR, external_data_dir
from autofe.featurespec import FeatureSpec

try:
    from autofe.gates import GateContext, Reason, Verdict, run_gates
    from autofe.gates.leakage import CHECKS
except ImportError as exc:  # the gates are built alongside this benchmark
    raise SystemExit(f"benchmarks/gates.py needs autofe.gates.run_gates: {exc}") from exc

FIXTURES = REPO_DIR / "tests" / "fixtures" / "leakage"
EXAMPLE_CATALOG = REPO_DIR / "tests" / "fixtures" / "catalogs" / "ex8"
HEADER = re.compile(r"^-- (expect|category|why|coverage): (.+)$", re.M)
TARGET_S = 1.0
Check = Callable[[FeatureSpec, GateContext], list[Reason]]


@dataclass(frozen=True)
class Fixture:
    spec: FeatureSpec
    expect: frozenset[str]
    """Acceptable leakage codes; empty for a clean feature."""
    coverage_low: bool


@dataclass(frozen=True)
class Timing:
    fixture: Fixture
    verdict: Verdict
    seconds: dict[str, float]
    """Per gate (``completeness``, ``leakage``) and per check (``leakage.static``, ...)."""

    @property
    def as_expected(self) -> bool:
        """Leaky fixtures refused for leakage, clean ones by no gate but the cost gate's.

        The cost gate judges growth, not leakage: at 10 000 runs it refuses the fixtures that
        compare every pair of a job's runs, and :attr:`cost_refused` counts them.
        """
        if not self.fixture.expect:
            return all(r.gate == "cost" for r in self.verdict.reasons)
        codes = {r.code for r in self.verdict.reasons if r.gate == "leakage"}
        return bool(codes & self.fixture.expect)

    @property
    def cost_refused(self) -> bool:
        return any(r.gate == "cost" for r in self.verdict.reasons)


def load_fixture(path: Path) -> Fixture:
    """The fixture's feature and expectation (the tests validate the headers)."""
    text = path.read_text()
    fields = dict(HEADER.findall(text))
    verdict, _, codes = fields["expect"].partition(" ")
    sql = HEADER.sub("", text).strip()
    spec = FeatureSpec.model_validate(
        {"name": path.stem, "sql": sql, "category": fields["category"]}
    )
    expect = frozenset(c.strip() for c in codes.split("|")) if verdict == "reject" else frozenset()
    return Fixture(spec, expect, "coverage" in fields)


def _check_name(check: Check) -> str:
    return "leakage." + check.__name__.removeprefix("check_").removesuffix("_leakage")


def time_fixture(fixture: Fixture, ctx: GateContext) -> Timing:
    """Run every gate once (verdict and gate times), then each leakage check alone."""
    if fixture.coverage_low:
        ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, min_coverage=0))
    verdict = run_gates(fixture.spec, ctx)
    seconds = dict(verdict.seconds)
    for check in CHECKS:
        started = time.perf_counter()
        check(fixture.spec, ctx)
        seconds[_check_name(check)] = time.perf_counter() - started
    return Timing(fixture, verdict, seconds)


def _row(name: str, values: list[float]) -> str:
    p50, p90, top = (percentile(values, q) for q in (0.5, 0.9, 1.0))
    within = sum(v <= TARGET_S for v in values)
    return f"| {name} | {len(values)} | {p50:.3f} | {p90:.3f} | {top:.3f} | {within} |"


def _slowest(timings: Iterable[Timing], key: str, n: int = 5) -> str:
    ranked = sorted(timings, key=lambda t: t.seconds[key], reverse=True)[:n]
    return ", ".join(f"`{t.fixture.spec.name}` {t.seconds[key]:.2f} s" for t in ranked)


def report_markdown(timings: list[Timing], runs: int) -> str:
    leaky = sum(bool(t.fixture.expect) for t in timings)
    agree = sum(t.as_expected for t in timings)
    cost = sum(t.cost_refused for t in timings)
    return _table(
        timings,
        f"--runs {runs}",
        f"Warehouse: {runs:,} runs built by `benchmarks/warehouse_10k.py` (recipe in its "
        f"docstring). Features: the {len(timings)} fixtures of `tests/fixtures/leakage` "
        f"({leaky} leaky, {len(timings) - leaky} clean); {agree} got their expected leakage "
        f"verdict on this warehouse; the cost gate refused {cost} for their growth.",
    )


def example_markdown(timings: list[Timing], runs: int) -> str:
    passed = sum(t.verdict.accepted for t in timings)
    other = sum(not t.as_expected for t in timings)
    return _table(
        timings,
        "--example",
        f"Warehouse: the example workspace ingested ({runs:,} runs). Features: the "
        f"{len(timings)} of `tests/fixtures/catalogs/ex8`, every feature the gates admitted in "
        f"one full `autofe run` on it (before the cost gate existed); {passed} passed every "
        f"gate again, the cost gate refused {sum(t.cost_refused for t in timings)} for their "
        f"growth, another gate {other}.",
    )


def _table(timings: list[Timing], options: str, warehouse: str) -> str:
    keys = list(timings[0].seconds)
    lines = [
        f"Command: `.venv/bin/python benchmarks/gates.py {options}` — one pass per feature.",
        f"Machine: {machine()}.",
        warehouse,
        "",
        f"| gate / check | features | p50 s | p90 s | max s | ≤ {TARGET_S:g} s |",
        "|---|---|---|---|---|---|",
        *(_row(key, [t.seconds[key] for t in timings]) for key in keys),
        "",
        f"Slowest leakage: {_slowest(timings, 'leakage')}.",
        f"Slowest completeness: {_slowest(timings, 'completeness')}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument(
        "--example", action="store_true", help="the example run's features on the example"
    )
    parser.add_argument("--write", type=Path, help="update this results file's gates section")
    args = parser.parse_args()
    if args.example:
        _write(args.write, "gates-example", *_time_example())
        return
    external = external_data_dir()
    if external is None:
        raise SystemExit("benchmarks/gates.py needs ../shared/data/external beside the checkout")
    fixtures = [load_fixture(p) for p in sorted(FIXTURES.glob("*.sql"))]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "gates10k.duckdb"
        runs = build_warehouse(db, external, args.runs)
        ctx = GateContext.load(db)
        timings = [time_fixture(f, ctx) for f in fixtures]
    _write(args.write, "gates", report_markdown(timings, runs), timings)


def _time_example() -> tuple[str, list[Timing]]:
    """Ingest the example workspace into a scratch warehouse and time the ex8 features on it."""
    from autofe.config import IngestSettings, example_workspace
    from autofe.feature_catalog import load_catalog
    from autofe.ingest.ingest import ingest

    fixtures = [Fixture(spec, frozenset(), False) for spec in load_catalog(EXAMPLE_CATALOG)]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "example.duckdb"
        ingest([example_workspace()], IngestSettings(db=db, workers=1))
        with duckdb.connect(str(db), read_only=True) as con:
            row = con.execute("SELECT count(*) FROM runs").fetchone()
        ctx = GateContext.load(db)
        timings = [time_fixture(f, ctx) for f in fixtures]
    return example_markdown(timings, int(row[0]) if row else 0), timings


def _write(results: Path | None, section: str, body: str, timings: list[Timing]) -> None:
    print(body)
    for t in timings:
        if not t.as_expected:
            print(f"unexpected verdict: {t.fixture.spec.name}: {t.verdict.as_dict()['reasons']}")
    if results:
        write_section(results, section, body)


if __name__ == "__main__":
    main()
