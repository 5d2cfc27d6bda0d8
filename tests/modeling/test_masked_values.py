"""Masked feature values on the synthetic reruns warehouse (no third-party data needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest
from reruns_warehouse import LAST_SPEC, PER_CORE_SPEC, reruns_warehouse

from autofe.evals import masked as evals_masked
from autofe.modeling import masked
from autofe.modeling.dataset import LABELLED_SQL, as_labelled


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reruns_warehouse(tmp_path_factory.mktemp("masked") / "w.duckdb")


def runs_on(db: Path, config: str) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run_id FROM runs WHERE cluster_config_id = ?", [config])
        return [r for (r,) in rows.fetchall()]


def test_hidden_runs_lose_outcomes_and_the_original_is_untouched(db: Path, tmp_path: Path) -> None:
    hidden = runs_on(db, "c1")
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(db, copy)
    masked.hide_outcomes(copy, hidden)
    query = "SELECT count(*), count(duration_s), count(end_time) FROM runs WHERE run_id IN ?"
    with duckdb.connect(str(copy), read_only=True) as con:
        assert con.execute(query, [hidden]).fetchone() == (len(hidden), 0, 0)
        (known,) = con.execute(
            "SELECT count(*) FROM run_attributes WHERE run_id IN ?", [hidden]
        ).fetchone() or (0,)
        assert known == len(hidden)  # known-at-submit attributes stay
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(query, [hidden]).fetchone() == (len(hidden),) * 3


def test_history_sees_nothing_of_hidden_runs_and_submit_time_values_do_not_move(db: Path) -> None:
    hidden = runs_on(db, "c1")
    plain = masked.masked_values(db, [LAST_SPEC, PER_CORE_SPEC], [])
    blind = masked.masked_values(db, [LAST_SPEC, PER_CORE_SPEC], hidden)
    assert blind["input_mb_per_core"] == plain["input_mb_per_core"]
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT duration_s FROM runs WHERE run_id IN ?", [hidden]).fetchall()
    durations = {d for (d,) in rows}
    last = LAST_SPEC.name
    assert any(v in durations for v in plain[last].values())  # c1's runs were read before
    assert not any(v in durations for v in blind[last].values())
    assert masked.submit_time_only(db, [LAST_SPEC, PER_CORE_SPEC]) == [PER_CORE_SPEC]


def test_out_of_fold_values_come_from_each_run_s_own_fold(db: Path) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        runs = as_labelled(con.execute(LABELLED_SQL).fetchall())
    half = np.arange(len(runs)) % 2 == 0
    evens, odds = np.flatnonzero(half), np.flatnonzero(~half)
    folds = [(odds, evens), (evens, odds)]
    (values,) = masked.out_of_fold_values(db, runs, [LAST_SPEC], folds).values()
    first = masked.masked_values(db, [LAST_SPEC], [runs[i][0] for i in folds[0][1]])
    assert all(values[runs[i][0]] == first[LAST_SPEC.name][runs[i][0]] for i in folds[0][1])
    assert set(values) == {r[0] for r in runs}


def test_the_evaluation_protocols_keep_their_names() -> None:
    assert evals_masked.masked_values is masked.masked_values
    assert evals_masked.out_of_fold_values is masked.out_of_fold_values
    assert evals_masked.hide_outcomes is masked.hide_outcomes
    assert evals_masked.submit_time_only is masked.submit_time_only
