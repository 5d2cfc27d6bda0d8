"""Recipes rewritten in linear forms (#29) give today's values.

Each original is kept, rendered with its default parameters, in one of two folders:

- ``tests/fixtures/recipes_quadratic/<recipe>.sql``: quadratic in the warehouse (the cost gate
  refuses the original and admits the rewrite);
- ``tests/fixtures/recipes_per_job/<recipe>.sql``: a join of each run with every earlier run of
  its job (or the job's earlier submissions), whose rows grow with the square of a job's
  history. Whole-job samples grow the number of jobs, not their histories, so the cost gate
  admits them; at a million runs their intermediate rows outgrew the sandbox's 1 GB.

On the shipped example every rewrite returns the same value for every run as its original."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.cost import check_cost
from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.sandbox.session import Sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FILES = sorted((FIXTURES / "recipes_quadratic").glob("*.sql"))
PER_JOB = sorted((FIXTURES / "recipes_per_job").glob("*.sql"))
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
    assert len(FILES) >= 1 and len(PER_JOB) >= 1
    kept = FILES + PER_JOB
    assert all(f.stem in SPECS for f in kept), [f.stem for f in kept if f.stem not in SPECS]


@pytest.mark.parametrize("original", FILES + PER_JOB, ids=lambda f: f.stem)
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
