"""History features under held-out protocols: the held-out runs' outcomes are hidden (C3O)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pytest

from autofe.evals.masked import (
    hide_outcomes,
    masked_values,
    out_of_fold_values,
    submit_time_only,
)
from autofe.evals.protocols import (
    evaluate_generated,
    grouped_folds,
    labelled_groups,
    leave_one_group_out,
    raw_values,
)
from autofe.featurespec import FeatureSpec


@pytest.fixture(scope="module")
def c3o_db(mapping_db: Callable[[str], Path]) -> Path:
    return mapping_db("c3o")


@pytest.fixture(scope="module")
def one_config(c3o_db: Path) -> list[str]:
    """The runs of the configuration with the most runs."""
    with duckdb.connect(str(c3o_db), read_only=True) as con:
        (config,) = con.execute(
            "SELECT cluster_config_id FROM runs GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1"
        ).fetchone() or ("",)
        return [
            r
            for (r,) in con.execute(
                "SELECT run_id FROM runs WHERE cluster_config_id = ?", [config]
            ).fetchall()
        ]


def test_hidden_runs_keep_their_row_but_lose_their_outcome(
    c3o_db: Path, one_config: list[str], tmp_path: Path
) -> None:
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(c3o_db, copy)
    hide_outcomes(copy, one_config)
    with (
        duckdb.connect(str(copy), read_only=True) as con,
        duckdb.connect(str(c3o_db), read_only=True) as orig,
    ):
        query = "SELECT count(*), count(duration_s), count(status), count(submit_time) FROM runs"
        hidden_rows = con.execute(
            query + " WHERE run_id IN (SELECT unnest(?))", [one_config]
        ).fetchone()
        assert hidden_rows == (len(one_config), 0, 0, len(one_config))
        others = " WHERE run_id NOT IN (SELECT unnest(?))"
        assert (
            con.execute(query + others, [one_config]).fetchone()
            == orig.execute(query + others, [one_config]).fetchone()
        )
        post = (
            "SELECT count(*) FROM run_attributes WHERE availability = 'post_execution' "
            "AND run_id IN (SELECT unnest(?))"
        )
        assert con.execute(post, [one_config]).fetchone() == (0,)
    with duckdb.connect(str(c3o_db), read_only=True) as orig:
        assert orig.execute("SELECT count(duration_s) FROM runs").fetchone() == (
            orig.execute("SELECT count(*) FROM runs").fetchone()
        )  # the original is untouched


def test_a_history_feature_cannot_see_the_hidden_configuration(
    same_config_last: FeatureSpec, c3o_db: Path, one_config: list[str]
) -> None:
    (plain,) = masked_values(c3o_db, [same_config_last], []).values()
    (masked,) = masked_values(c3o_db, [same_config_last], one_config).values()
    assert sum(plain.get(r) is not None for r in one_config) > len(one_config) // 2
    assert all(masked.get(r) is None for r in one_config)
    rest = set(plain) - set(one_config)
    assert all(masked.get(r) == plain.get(r) for r in rest)


def test_generated_sets_are_scored_without_peeking_at_the_held_out_group(
    c3o_db: Path, same_config_last: FeatureSpec
) -> None:
    runs, _ = labelled_groups(c3o_db)
    raw = raw_values(c3o_db, ["node_type", "num_workers"])
    extras = {"history": {}, "history + raw": raw}
    results = evaluate_generated(c3o_db, "c3o", [same_config_last], extras)
    assert {(r.protocol, r.features) for r in results} == {
        (p, f)
        for p in ("point 5-fold", "grouped 5-fold", "leave-one-machine-type-out")
        for f in extras
    }
    assert all(r.runs == len(runs) for r in results)
    assert {r.n_features for r in results if r.features == "history + raw"} == {len(raw) + 1}
    assert all(np.isfinite(r.mape) and r.mape < 1 for r in results if r.features != "history")


def test_out_of_fold_values_hide_every_run_s_own_fold(
    c3o_db: Path, same_config_last: FeatureSpec
) -> None:
    """Training rows as well as test rows: no run reads its own configuration's history."""
    runs, groups = labelled_groups(c3o_db)
    folds = grouped_folds(groups.config, 5, seed=0)
    (values,) = out_of_fold_values(c3o_db, runs, [same_config_last], folds).values()
    assert set(values) == {r[0] for r in runs} and all(v is None for v in values.values())
    by_type = leave_one_group_out(groups.node_type)
    (last_of_type,) = out_of_fold_values(c3o_db, runs, [same_config_last], by_type).values()
    assert all(v is None for v in last_of_type.values())  # a config has one node type


def test_submit_time_only_keeps_the_features_that_read_no_outcome(
    c3o_db: Path, same_config_last: FeatureSpec
) -> None:
    size = FeatureSpec(
        name="data_mb",
        category="data-size",
        sql="SELECT run_id, value FROM run_attributes WHERE name = 'data_size_MB'",
    )
    assert submit_time_only(c3o_db, [same_config_last, size]) == [size]
