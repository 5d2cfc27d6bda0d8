"""The runtime model on real runs (C3O): accuracy, determinism, honest intervals."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.modeling.conformal import LEVELS
from autofe.modeling.dataset import FeatureValues, build_dataset, labelled_runs
from autofe.modeling.metrics import coverage, score
from autofe.modeling.splits import tail_split
from autofe.modeling.train import fit
from autofe.pipelines.ingest import ingest

REPO = Path(__file__).resolve().parents[2]

FEATURES = {
    "job": "SELECT r.run_id, r.job_id AS value FROM runs r",
    "node_type": "SELECT r.run_id, c.node_type AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "vcpus": "SELECT r.run_id, c.vcpu_per_node * c.num_workers AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "memory_gb": "SELECT r.run_id, c.memory_gb_per_node * c.num_workers AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "data_mb": "SELECT run_id, value FROM run_attributes WHERE name = 'data_size_MB'",
    "mb_per_core": "SELECT r.run_id, a.value / (c.vcpu_per_node * c.num_workers) AS value "
    "FROM runs r JOIN cluster_configs c ON c.config_id = r.cluster_config_id "
    "JOIN run_attributes a ON a.run_id = r.run_id AND a.name = 'data_size_MB'",
}


@pytest.fixture(scope="module")
def c3o(tmp_path_factory: pytest.TempPathFactory, external: Path) -> duckdb.DuckDBPyConnection:
    db = tmp_path_factory.mktemp("c3o") / "c3o.duckdb"
    ingest([REPO / "examples" / "mappings" / "c3o.toml"], IngestSettings(db=db, workers=1))
    return duckdb.connect(str(db), read_only=True)


def values(con: duckdb.DuckDBPyConnection) -> FeatureValues:
    """The features above plus every known-at-submit run attribute (the job's parameters)."""
    out: dict[str, dict[str, object]] = {
        name: dict(con.execute(sql).fetchall()) for name, sql in FEATURES.items()
    }
    rows = con.execute(
        "SELECT name, run_id, value FROM run_attributes WHERE availability = 'known_at_submit'"
    ).fetchall()
    for name, run_id, value in rows:
        out.setdefault(f"attr_{name}", {})[run_id] = value
    return out  # type: ignore[return-value]


def test_model_is_accurate_and_its_intervals_cover(c3o: duckdb.DuckDBPyConnection) -> None:
    runs = labelled_runs(c3o)
    rng = np.random.default_rng(0)  # C3O's submit times are synthetic: order the runs at random
    runs = [runs[i] for i in rng.permutation(len(runs))]
    data = build_dataset(runs, values(c3o))
    learn, holdout = tail_split(len(data), (0.8, 0.2))
    model = fit(data.rows(learn), seed=1)
    test = data.rows(holdout)
    predicted = model.predict_seconds(test.x)
    metrics = score(test.seconds, predicted)
    assert metrics.r2 > 0.9 and metrics.mape < 0.15, metrics
    for level in LEVELS:
        low, high = zip(*(model.calibration.interval(p, level) for p in predicted), strict=True)
        measured = coverage(test.seconds, np.array(low), np.array(high))
        assert abs(measured - level) <= 0.05, (level, measured)


def test_fit_is_deterministic(c3o: duckdb.DuckDBPyConnection) -> None:
    data = build_dataset(labelled_runs(c3o)[:600], values(c3o))
    a, b = fit(data, seed=3), fit(data, seed=3)
    assert a.trees == b.trees
    assert np.array_equal(a.predict_seconds(data.x), b.predict_seconds(data.x))


def test_text_features_are_coded_and_unseen_text_is_missing(
    c3o: duckdb.DuckDBPyConnection,
) -> None:
    data = build_dataset(labelled_runs(c3o)[:100], values(c3o))
    assert data.encoder.encode("node_type", "c4.2xlarge") >= 0
    assert np.isnan(data.encoder.encode("node_type", "never-seen.4xlarge"))
    assert np.isnan(data.encoder.encode("data_mb", None))


def test_too_few_runs_or_no_features_are_clear_errors(c3o: duckdb.DuckDBPyConnection) -> None:
    runs = labelled_runs(c3o)
    with pytest.raises(ConfigError, match="too few to train"):
        fit(build_dataset(runs[:10], values(c3o)))
    with pytest.raises(ConfigError, match="no features"):
        fit(build_dataset(runs[:100], {}))
