"""Manual history features rewritten in linear forms give their originals' values.

Each original, quadratic in a job's history (it joins each run with every earlier run of its
job), is kept in ``tests/fixtures/manual_quadratic/<feature>.sql``; the shipped feature reads
the job's runs ranked by end (or submit) time, looked up by ASOF at the target's submission.
On the shipped example every rewrite returns the same value for every run as its original."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autofe.evals.manual import FEATURES_DIR, manual_features
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.cost import check_cost, feature_growth
from autofe.gates.cost_sample import cost_samples
from autofe.sandbox.session import Sandbox

ORIGINALS = sorted(
    (Path(__file__).resolve().parents[1] / "fixtures" / "manual_quadratic").glob("*.sql")
)
SPECS = {s.name: s for s in manual_features()}


@pytest.fixture(scope="module")
def context(example_warehouse: Path) -> GateContext:
    return GateContext.load(example_warehouse)


def _same(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def test_every_original_is_a_manual_feature() -> None:
    assert len(ORIGINALS) >= 10
    assert all(f.stem in SPECS for f in ORIGINALS), [f.stem for f in ORIGINALS]


@pytest.mark.parametrize("original", ORIGINALS, ids=lambda f: f.stem)
def test_rewrite_keeps_the_header(original: Path) -> None:
    def header(path: Path) -> list[str]:
        return [line for line in path.read_text().splitlines() if line.startswith("-- ")][:4]

    assert header(FEATURES_DIR / original.name) == header(original)


@pytest.mark.parametrize("original", ORIGINALS, ids=lambda f: f.stem)
def test_rewrite_gives_the_original_values(original: Path, context: GateContext) -> None:
    new = SPECS[original.stem]
    with Sandbox.open(context.db) as box:
        before = dict(box.query(original.read_text()).rows)
        after = dict(box.query(new.sql).rows)
    differ = {r: (before.get(r), after.get(r)) for r in before.keys() | after.keys()}
    differ = {r: v for r, v in differ.items() if not _same(*v)}
    assert not differ, list(differ.items())[:5]
    assert sum(v is not None for v in before.values()) > 0  # the example exercises it


@pytest.mark.parametrize("original", ORIGINALS, ids=lambda f: f.stem)
def test_original_grows_with_job_history_and_rewrite_is_admitted(
    original: Path, context: GateContext
) -> None:
    """On the example (about 20 runs per job) the originals' growth with each job's history
    is n^1.4 to n^1.8, most past the gate's limit; every rewrite's is near n^1."""
    new = SPECS[original.stem]
    old = FeatureSpec(name=new.name, sql=original.read_text(), category=new.category)
    s = context.settings
    samples = cost_samples(
        context.db, context.catalog, s.cost_sample_shares, s.cost_sample_cap, s.limits
    )
    before, after = feature_growth(old, samples), feature_growth(new, samples)
    assert before.depth and before.exponent > after.exponent + 0.3
    assert check_cost(new, context) == []
