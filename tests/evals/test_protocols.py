"""Grouped and leave-one-machine-type-out protocols on real third-party runs (C3O)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autofe.config import IngestSettings
from autofe.errors import ConfigError
from autofe.evals.protocols import (
    evaluate_baselines,
    evaluate_protocols,
    grouped_folds,
    labelled_groups,
    leave_one_group_out,
    raw_values,
)
from autofe.ingest.ingest import ingest

REPO = Path(__file__).resolve().parents[2]
C3O_RAW = ["node_type", "num_workers", "vcpu_per_node", "memory_gb_per_node"]


@pytest.fixture(scope="module")
def c3o_db(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Path:
    db = tmp_path_factory.mktemp("protocols") / "c3o.duckdb"
    ingest([REPO / "examples" / "mappings" / "c3o.toml"], IngestSettings(db=db, workers=1))
    return db


def test_grouped_folds_never_split_a_configuration(c3o_db: Path) -> None:
    _, groups = labelled_groups(c3o_db)
    config = np.array(groups.config)
    folds = grouped_folds(groups.config)
    assert len(folds) == 5
    assert sorted(np.concatenate([t for _, t in folds]).tolist()) == list(range(len(config)))
    for train, test in folds:
        assert not set(config[train]) & set(config[test])


def test_point_folds_keep_the_repeats_of_an_experiment_together(c3o_db: Path) -> None:
    """C3O ran each of its 930 experiment points (job, inputs, configuration) five times."""
    _, groups = labelled_groups(c3o_db)
    point = np.array(groups.point)
    assert len(set(groups.point)) == 930 and len(point) == 4650
    for train, test in grouped_folds(groups.point):
        assert not set(point[train]) & set(point[test])
        # a configuration is seen in training with other inputs
        assert set(np.array(groups.config)[test]) <= set(np.array(groups.config)[train])


def test_each_machine_type_is_held_out_once(c3o_db: Path) -> None:
    _, groups = labelled_groups(c3o_db)
    types = np.array(groups.node_type)
    folds = leave_one_group_out(groups.node_type)
    assert len(folds) == len(set(groups.node_type)) >= 3
    for train, test in folds:
        assert len(set(types[test])) == 1 and types[test][0] not in set(types[train])


def test_raw_column_lightgbm_under_every_protocol(c3o_db: Path) -> None:
    raw = raw_values(c3o_db, C3O_RAW)
    assert {"cluster_node_type", "cluster_num_workers", "attr_data_size_MB"} <= set(raw)
    results = {r.protocol: r for r in evaluate_protocols(c3o_db, "c3o", {"raw": raw})}
    point, grouped = results["point 5-fold"], results["grouped 5-fold"]
    unseen = results["leave-one-machine-type-out"]
    assert point.runs == grouped.runs == unseen.runs > 4000
    # unseen inputs on known configurations are easiest, unseen configurations harder, unseen
    # hardware hardest
    assert point.mape < grouped.mape < 0.2 and grouped.r2 > 0.8
    assert unseen.mape > grouped.mape


def test_simple_baselines_fit_on_each_folds_training_runs(c3o_db: Path) -> None:
    found = {(r.protocol, r.features): r for r in evaluate_baselines(c3o_db, "c3o")}
    assert all(r.baseline and r.n_features == 0 and r.runs == 4650 for r in found.values())
    pair, job = "job × configuration median", "job's median"
    # a point's configuration is in training with other inputs: the pair median helps
    assert found["point 5-fold", pair].mape < found["point 5-fold", job].mape
    # grouped: a test run's configuration never is, so the pair falls back to the job's median
    for protocol in ("grouped 5-fold", "leave-one-machine-type-out"):
        assert found[protocol, pair].mape == found[protocol, job].mape
    ernest = found["grouped 5-fold", "Ernest-style fit in total cores"]
    assert ernest.mape < found["grouped 5-fold", job].mape  # scale-out carries to new sizes


def test_protocol_inputs_are_checked() -> None:
    with pytest.raises(ConfigError, match="too few for 5 grouped folds"):
        grouped_folds(["a", "b"])
    with pytest.raises(ConfigError, match="at least two node types"):
        leave_one_group_out(["a", "a"])
    with pytest.raises(ConfigError, match="not cluster columns"):
        raw_values(Path("unused.duckdb"), ["gpu_count"])
