"""The feature matrix: values that differ only in their last bits give the same matrix and model."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np

from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import (
    FeatureValues,
    build_dataset,
    columns_dataset,
    labelled_runs,
    stable,
)
from autofe.modeling.train import fit
from autofe.warehouse.feature_store import read_store_columns, read_store_values, write_feature


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


def test_columns_from_the_store_give_the_dict_path_s_matrix_and_encoder(
    c3o: duckdb.DuckDBPyConnection, c3o_values: FeatureValues, tmp_path: Path
) -> None:
    """The final fit reads the store as columns (as dicts, a million runs took it to 23 GiB): the
    matrix and the text encoding are the ones the per-run dicts give."""
    runs = labelled_runs(c3o)
    ids = [r[0] for r in runs]
    label = {r: ("big" if i % 3 == 0 else None if i % 3 == 1 else "mid") for i, r in enumerate(ids)}
    values = {**c3o_values, "size_label": {**label, ids[4]: "small"}}
    store = tmp_path / "store.duckdb"
    specs = {}
    for name, column in values.items():
        text = any(isinstance(v, str) for v in column.values())
        specs[name] = FeatureSpec(
            name=name.lower(),
            sql=f"SELECT run_id, NULL AS value FROM runs -- {name}",
            category="static-config",
            value_type="VARCHAR" if text else "DOUBLE",
        )
        write_feature(store, specs[name], list(column.items()), 1.0)
    by_id = read_store_values(store, [s.feature_id for s in specs.values()])
    old = build_dataset(runs, {n: by_id[s.feature_id] for n, s in specs.items()})
    columns = read_store_columns(store, ids, [s.feature_id for s in specs.values()])
    new = columns_dataset(runs, {n: columns[s.feature_id] for n, s in specs.items()})
    assert new.features == old.features and new.run_ids == old.run_ids
    assert np.array_equal(new.x, old.x, equal_nan=True)
    assert new.encoder == old.encoder
    assert new.encoder.vocab["size_label"] == ("big", "mid", "small")
    assert np.isnan(new.x[1, new.features.index("size_label")])
