"""Leakage rules as data: every ``tests/fixtures/leakage/*.sql`` file must get its verdict.

Each fixture is one feature with a header, in the style of sqlglot's optimizer fixtures::

    -- expect: reject inclusive_cutoff        (or: accept)
    -- category: history
    -- why: one line: what leaks, or why it helps and is leakage-safe
    -- coverage: low                          (optional, clean fixtures only)
    SELECT ... AS run_id, ... AS value FROM ...

``expect: reject`` names the leakage reason code the gate must give; ``a | b`` lists codes
that are all acceptable (``| perturbation`` when only the dynamic check may see the leak).
A clean fixture must pass every gate on the ``gates_warehouse``. Coverage is measured over
all of its runs, 99 % of them C3O, so the few features that can only describe event-log or
workspace runs (stage history, scripts, table snapshots) say ``coverage: low``: for them,
and only for them, the gates run with ``min_coverage=0`` so the other checks still apply.

The gates package is imported inside the tests that need it, so the DuckDB check of every
fixture runs even while a gate module is being written.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from autofe.featurespec import CATEGORIES, FeatureSpec

if TYPE_CHECKING:
    from autofe.gates.context import GateContext

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "leakage"
HEADER = re.compile(r"^-- (expect|category|why|coverage): (.+)$")
MIN_EACH = 40
MIN_COVERAGE = 0.5
"""``GateSettings().min_coverage``; the set test checks they still agree."""


@dataclass(frozen=True)
class Fixture:
    """One fixture file: its header, parsed, and the SQL below it."""

    path: Path
    expect: tuple[str, ...]
    """Acceptable leakage codes; empty for a clean feature."""
    category: str
    why: str
    coverage_low: bool
    sql: str

    @property
    def leaky(self) -> bool:
        return bool(self.expect)

    def spec(self) -> FeatureSpec:
        return FeatureSpec.model_validate(
            {
                "name": self.path.stem,
                "sql": self.sql,
                "category": self.category,
                "description": self.why,
                "rationale": self.why,
            }
        )


def parse_fixture(path: Path) -> Fixture:
    """Split a fixture into its header fields and SQL; a malformed header fails loudly."""
    lines = path.read_text().splitlines()
    fields: dict[str, str] = {}
    while lines and (match := HEADER.match(lines[0])):
        fields[match[1]] = match[2].strip()
        lines.pop(0)
    missing = {"expect", "category", "why"} - fields.keys()
    assert not missing, f"{path.name}: header lacks {sorted(missing)}"
    verdict, _, codes = fields["expect"].partition(" ")
    expect = tuple(code.strip() for code in codes.split("|")) if verdict == "reject" else ()
    assert verdict in {"accept", "reject"}, f"{path.name}: expect must be accept or reject"
    assert verdict == "accept" or expect, f"{path.name}: reject needs a reason code"
    assert fields["category"] in CATEGORIES, f"{path.name}: unknown category"
    assert fields.get("coverage", "low") == "low", f"{path.name}: coverage can only be low"
    assert not (expect and "coverage" in fields), f"{path.name}: coverage is for clean ones"
    return Fixture(
        path,
        expect,
        fields["category"],
        fields["why"],
        "coverage" in fields,
        "\n".join(lines).strip(),
    )


FILES = sorted(FIXTURES.glob("*.sql"))
ALL = [parse_fixture(p) for p in FILES]


def _normalised(sql: str) -> str:
    """The SQL with every literal replaced by ``?`` and comments and layout dropped.

    >>> _normalised("SELECT 1 AS a  -- x") == _normalised("select 2 as a")
    True
    """

    def blank(node: exp.Expression) -> exp.Expression:
        return exp.Placeholder() if isinstance(node, exp.Literal) else node

    tree = sqlglot.parse_one(sql, read="duckdb").transform(blank)
    return tree.sql(dialect="duckdb", comments=False)


def test_fixture_set_is_large_and_distinct() -> None:
    from autofe.gates.codes import Leakage
    from autofe.gates.context import GateSettings

    codes = {str(code) for code in Leakage}
    leaky = [f for f in ALL if f.leaky]
    clean = [f for f in ALL if not f.leaky]
    assert len(leaky) >= MIN_EACH, f"{len(leaky)} leaky fixtures"
    assert len(clean) >= MIN_EACH, f"{len(clean)} clean fixtures"
    twins = [sql for sql, n in Counter(_normalised(f.sql) for f in ALL).items() if n > 1]
    assert not twins, f"fixtures equal up to constants: {twins}"
    unknown = {f.path.name: f.expect for f in leaky if not set(f.expect) <= codes}
    assert not unknown, f"unknown leakage codes: {unknown}"
    primary = {f.expect[0] for f in leaky}
    assert primary >= codes - {str(Leakage.PERTURBATION)}, "a leakage code lacks cases"
    assert {f.category for f in clean} == set(CATEGORIES), "a category lacks clean cases"
    assert GateSettings().min_coverage == MIN_COVERAGE


@pytest.mark.parametrize("fixture", ALL, ids=lambda f: f.path.stem)
def test_fixture_runs_in_duckdb(fixture: Fixture, gates_warehouse: Path) -> None:
    """Independent of the gates: the SQL runs and returns one DOUBLE value per known run."""
    con = duckdb.connect(str(gates_warehouse), read_only=True)
    try:
        result = con.sql(fixture.sql)
        columns, types = result.columns, [str(t) for t in result.types]
        rows, distinct, unknown, values = con.execute(
            f"SELECT count(*), count(DISTINCT f.run_id), count(*) FILTER (WHERE r.run_id IS NULL),"
            f" count(f.value) FROM ({fixture.sql}) AS f LEFT JOIN runs AS r USING (run_id)"
        ).fetchall()[0]
        runs = con.execute("SELECT count(*) FROM runs").fetchall()[0][0]
    finally:
        con.close()
    assert columns == ["run_id", "value"] and types[1] == "DOUBLE", (columns, types)
    assert rows == distinct, f"{rows - distinct} duplicate run_ids"
    assert unknown == 0, f"{unknown} run_ids are not runs"
    if not fixture.leaky and not fixture.coverage_low:
        assert values / runs >= MIN_COVERAGE, f"coverage {values / runs:.1%}"


@pytest.fixture(scope="module")
def gate_context(gates_warehouse: Path) -> GateContext:
    from autofe.gates.context import GateContext

    return GateContext.load(gates_warehouse)


@pytest.mark.parametrize("fixture", ALL, ids=lambda f: f.path.stem)
def test_fixture_verdict(fixture: Fixture, gate_context: GateContext) -> None:
    from autofe.gates import run_gates

    ctx = gate_context
    if fixture.coverage_low:
        ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, min_coverage=0.0))
    verdict = run_gates(fixture.spec(), ctx)
    # The set is about leakage: a clean feature the cost gate refuses is still clean
    # (tests/gates/test_cost_gate.py covers that gate).
    reasons = [r for r in verdict.reasons if r.gate != "cost"]
    said = [f"{r.gate}/{r.code}: {r.message}" for r in reasons]
    if not fixture.leaky:
        assert not reasons, f"clean feature rejected: {said}"
        return
    codes = {r.code for r in reasons if r.gate == "leakage"}
    assert reasons, "leaky feature accepted"
    assert codes & set(fixture.expect), f"expected leakage {fixture.expect}, got {said}"
