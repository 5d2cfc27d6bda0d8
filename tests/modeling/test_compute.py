"""Computing features for a model: SQL too deeply nested to rewrite is a ModelError, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from autofe.errors import ModelError
from autofe.featurespec import FeatureSpec
from autofe.modeling.compute import feature_values, parse_query
from autofe.sandbox.session import Sandbox

DEEP_PARENS = "SELECT run_id, " + "(" * 5000 + "1" + ")" * 5000 + " AS value FROM runs"
DEEP_CASTS = "SELECT run_id, 1" + "::DOUBLE" * 400 + " AS value FROM runs"


def _spec(sql: str) -> FeatureSpec:
    return FeatureSpec(name="deep", sql=sql, category="history")


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (DEEP_PARENS, "statement nested too deeply to check"),
        (DEEP_CASTS, "statement nested too deeply to check: 403 levels, at most 100"),
    ],
    ids=["parens", "casts"],
)
def test_deep_sql_does_not_parse_for_a_prediction(sql: str, why: str) -> None:
    with pytest.raises(ModelError) as caught:
        parse_query(_spec(sql))  # on d2aa5f7: RecursionError
    assert str(caught.value) == f"feature deep: SQL does not parse ({why})"


def test_one_runs_values_of_a_deep_cast_chain_are_refused(example_warehouse: Path) -> None:
    with Sandbox.open(example_warehouse) as sandbox:
        run_id = sandbox.query("SELECT min(run_id) FROM runs").rows[0][0]
        with pytest.raises(ModelError, match=r"^feature deep: SQL does not parse \(statement"):
            feature_values(sandbox, _spec(DEEP_CASTS), [run_id])  # restricted() recursed
        with pytest.raises(ModelError) as every_run:
            feature_values(sandbox, _spec(DEEP_CASTS))
    assert str(every_run.value) == (
        "feature deep cannot be computed: refused: statement nested too deeply to check: "
        "403 levels, at most 100"
    )
