"""The manual baseline: about forty hand-written features, every one through the gates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from autofe.evals.manual import manual_features
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext, run_gates

SPECS = manual_features()


@pytest.fixture(scope="module")
def context(example_warehouse: Path) -> GateContext:
    return GateContext.load(example_warehouse)


def test_the_set_is_the_size_and_mix_of_a_manual_baseline() -> None:
    assert 35 <= len(SPECS) <= 50
    kinds = Counter(s.category for s in SPECS)
    assert {"static-config", "data-size", "history"} <= set(kinds)
    assert len({s.name for s in SPECS}) == len(SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_manual_feature_passes_the_gates(context: GateContext, spec: FeatureSpec) -> None:
    verdict = run_gates(spec, context)
    assert verdict.accepted, verdict.as_dict()["reasons"]
