"""The feature matrix: values that differ only in their last bits give the same matrix and model."""

from __future__ import annotations

import math

import duckdb
import numpy as np

from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs, stable
from autofe.modeling.train import fit


def _nudged(values: FeatureValues) -> FeatureValues:
    """Every float one unit in the last place larger: a parallel sum's reordering at most."""
    return {
        name: {
            r: float(np.nextafter(v, math.inf)) if isinstance(v, float) and v else v
            for r, v in column.items()
        }
        for name, column in values.items()
    }


def test_last_bit_differences_give_the_same_matrix_and_model(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues
) -> None:
    runs = labelled_runs(c3o)[:600]
    nudged = _nudged(c3o_values)
    changed = sum(nudged[n][r] != c3o_values[n][r] for n in c3o_values for r in c3o_values[n])
    assert changed > 1000  # C3O's real data sizes and hardware columns
    a, b = build_dataset(runs, c3o_values), build_dataset(runs, nudged)
    assert np.array_equal(a.x, b.x, equal_nan=True)
    assert np.array_equal(fit(a).predict_seconds(a.x), fit(b).predict_seconds(b.x))


def test_stable_keeps_twelve_significant_digits() -> None:
    x = np.array([123456.789012345678, -2.5e-9, 0.0, math.inf, math.nan, 1e-300, 3e300])
    rounded = stable(x)
    finite = np.isfinite(x)
    assert np.all(np.abs(rounded[finite] - x[finite]) <= 1e-12 * np.abs(x[finite]))
    assert rounded[2] == 0.0 and math.isinf(rounded[3]) and math.isnan(rounded[4])
    assert np.array_equal(stable(rounded), rounded, equal_nan=True)  # rounding again is a no-op
