"""admit: the gates first, the values only for a feature they accept; admitted_matrix stops at
the first rejected feature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autofe.errors import GateRejected
from autofe.evals.manual import manual_features
from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext
from autofe.gates.admit import admit, admitted_matrix, coverage, run_ids
from autofe.modeling.compute import feature_matrix, feature_values
from autofe.sandbox.session import Sandbox

SMALL = tuple(s for s in manual_features() if s.name in {"cfg_local_cores", "job_name"})
LEAKY = FeatureSpec(
    name="own_duration", sql="SELECT run_id, duration_s AS value FROM runs", category="history"
)


def test_an_accepted_feature_gets_what_the_sandbox_computes(example_warehouse: Path) -> None:
    ctx = GateContext.load(example_warehouse)
    with Sandbox.open(example_warehouse) as sandbox:
        admission = admit(SMALL[0], ctx, sandbox)
        assert admission.verdict.accepted
        assert admission.values == feature_values(sandbox, SMALL[0])
        runs = run_ids(sandbox)
    assert admission.values is not None and set(admission.values) == runs
    assert coverage(admission.values, runs) == 1.0


def test_a_rejected_feature_is_not_computed(example_warehouse: Path) -> None:
    ctx = GateContext.load(example_warehouse)
    with Sandbox.open(example_warehouse) as sandbox:
        admission = admit(LEAKY, ctx, sandbox)
    assert admission.values is None and admission.compute_s == 0.0
    assert "label_leak" in {r.code for r in admission.verdict.reasons}


def test_the_matrix_is_the_ungated_one_once_every_feature_is_admitted(
    example_warehouse: Path,
) -> None:
    data, seconds = admitted_matrix(example_warehouse, SMALL)
    ungated = feature_matrix(example_warehouse, SMALL)
    assert (data.features, data.run_ids) == (ungated.features, ungated.run_ids)
    assert np.array_equal(data.x, ungated.x, equal_nan=True)
    assert set(seconds) == {"gates", "features"}
    with pytest.raises(GateRejected, match=r"feature own_duration gate rejected .*label_leak: "):
        admitted_matrix(example_warehouse, (*SMALL, LEAKY))
