"""Recipes rewritten in linear forms (#29) give today's values.

Each original is kept, rendered with its default parameters, in one of three folders:

- ``tests/fixtures/recipes_quadratic/<recipe>.sql``: quadratic in the warehouse (the cost gate
  refuses the original and admits the rewrite);
- ``tests/fixtures/recipes_per_job/<recipe>.sql``: a join of each run with every earlier run of
  its job (or the job's earlier submissions), whose rows grow with the square of a job's
  history. Whole-job samples grow the number of jobs, not their histories, so the cost gate
  admits them; at a million runs their intermediate rows outgrew the sandbox's 1 GB.
- ``tests/fixtures/recipes_per_script/<recipe>.sql``: a regular expression over every run's
  script though runs share a few scripts (31 among 100k runs); on Spark, where the translated
  expression is slow and each CTE is evaluated wherever it is used, these took 60-100x DuckDB's
  time at 100k runs. The rewrites parse each distinct job script once and join the result back
  (a run's own script, which the leakage gate lets only that run read, is parsed with the run).

On the shipped example every rewrite returns the same value for every run as its original."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.cost import check_cost
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.sandbox.session import Sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted((FIXTURES / "recipes_quadratic").glob("*.sql"))
PER_JOB = sorted((FIXTURES / "recipes_per_job").glob("*.sql"))
PER_SCRIPT = sorted((FIXTURES / "recipes_per_script").glob("*.sql"))
SPECS = {r.name: recipe_spec(d, r) for d in load_corpus() for r in d.recipes}


@pytest.fixture(scope="module")
def context(example_warehouse: Path) -> GateContext:
    return GateContext.load(example_warehouse)


def _same(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def test_every_rewritten_recipe_keeps_its_original() -> None:
    assert len(FILES) >= 1 and len(PER_JOB) >= 1 and len(PER_SCRIPT) >= 1
    kept = FILES + PER_JOB + PER_SCRIPT
    assert all(f.stem in SPECS for f in kept), [f.stem for f in kept if f.stem not in SPECS]


@pytest.mark.parametrize("original", FILES + PER_JOB + PER_SCRIPT, ids=lambda f: f.stem)
def test_rewrite_gives_the_original_values(original: Path, context: GateContext) -> None:
    new = SPECS[original.stem]
    with Sandbox.open(context.db) as box:
        before = dict(box.query(original.read_text()).rows)
        after = dict(box.query(new.sql).rows)
    differ = {r: (before.get(r), after.get(r)) for r in before.keys() | after.keys()}
    differ = {r: v for r, v in differ.items() if not _same(*v)}
    assert not differ, list(differ.items())[:5]
    assert sum(v is not None for v in before.values()) > 0  # the example exercises it


@pytest.mark.parametrize("original", FILES, ids=lambda f: f.stem)
def test_original_is_refused_and_rewrite_admitted_by_the_cost_gate(
    original: Path, context: GateContext
) -> None:
    new = SPECS[original.stem]
    old = FeatureSpec(name=new.name, sql=original.read_text(), category=new.category)
    assert [r.code for r in check_cost(old, context)][:1] == ["grows_superlinearly"]
    assert check_cost(new, context) == []


SCRIPT_PARSING = [*PER_SCRIPT, FIXTURES / "recipes_per_job" / "history_job_scaling_s.sql"]
"""The originals that parsed every run's script; ``history_job_scaling_s``'s, which also read
each job's history per pair of runs, is kept (once) among the per-job originals."""


@pytest.mark.parametrize("original", SCRIPT_PARSING, ids=lambda f: f.stem)
def test_rewrite_parses_each_distinct_job_script_once(original: Path) -> None:
    """No regular expression reads a job's script once per run; one reads the distinct scripts.

    A run's own script is still parsed with the run: the leakage gate cannot prove that another
    run's identical text was known before this run's submission, while jobs are static."""
    new = sqlglot.parse_one(SPECS[original.stem].sql, read="duckdb")
    assert not any(_per_row(f) and _reads_jobs(f) for f in _script_regexes(new))
    assert any(not _per_row(f) for f in _script_regexes(new))
    old = sqlglot.parse_one(original.read_text(), read="duckdb")
    assert any(_per_row(f) and _reads_jobs(f) for f in _script_regexes(old))  # the check bites


def _script_regexes(tree: exp.Expr) -> list[exp.Func]:
    """The regular expressions whose subject is (derived from) a script text."""
    kinds = (exp.RegexpExtractAll, exp.RegexpReplace, exp.RegexpLike, exp.RegexpExtract)
    return [
        f
        for f in tree.find_all(exp.Func)
        if (isinstance(f, kinds) or f.sql_name().upper() == "REGEXP_MATCHES")
        and any("script" in c.name for c in f.this.find_all(exp.Column))
    ]


def _per_row(func: exp.Func) -> bool:
    """Whether the SELECT evaluating ``func`` reads anything but a DISTINCT subquery (a SELECT
    DISTINCT or a UNION): then it evaluates ``func`` once per row, not per distinct value."""
    select = func.find_ancestor(exp.Select)
    source = select and next((f for f in select.find_all(exp.From) if f.parent is select), None)
    inner = source.this if source else None
    return not (isinstance(inner, exp.Subquery) and inner.this.args.get("distinct"))


def _reads_jobs(func: exp.Func) -> bool:
    """Whether ``func``'s subject reads a column of the ``jobs`` table of its own SELECT."""
    select = func.find_ancestor(exp.Select)
    if select is None:
        return False
    tables = {
        t.alias_or_name: t.name
        for t in select.find_all(exp.Table)
        if t.find_ancestor(exp.Select) is select
    }
    return any(tables.get(c.table) == "jobs" for c in func.this.find_all(exp.Column))
