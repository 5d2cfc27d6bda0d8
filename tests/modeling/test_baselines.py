"""The simple baselines against values computed by hand on a 17-run synthetic warehouse.

Training runs are the first 11 by submit time; the 5 after them are the holdout. Job A's run
``r07`` takes 20 000 s, so it is still running when ``r12`` is submitted and must not count in
``r12``'s last-5 median, but has ended when ``r13`` is. Job D's three training runs follow
10 + 20 / P exactly (P the cluster's cores), so its Ernest fit is known in closed form.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from autofe.modeling.baselines import (
    BASELINES,
    FACTS_SQL,
    FOLD_BASELINES,
    RunFacts,
    as_facts,
    best_baseline,
    ernest,
    ernest_fit,
    ernest_terms,
    job_config_median,
    job_config_median_online,
    job_median,
    job_median_online,
    last5_median,
    out_of_fold_baselines,
    predict_fold,
    raw_lightgbm,
    raw_node_lightgbm,
    score_baselines,
)
from autofe.modeling.dataset import LABELLED_SQL
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

T0 = datetime(2024, 1, 1)
CUT = 11
CONFIGS = {  # config id: (vCPUs per node, workers) -> cores 8, 16, 8 (driver alone), 32, 64
    "c1": (4.0, 2),
    "c2": (4.0, 4),
    "c3": (8.0, 0),
    "c4": (8.0, 4),
    "c5": (16.0, 4),
}
RUNS = [  # run id, job, config, duration (s); submitted an hour apart in this order
    ("r01", "A", "c1", 100.0),
    ("r02", "A", "c1", 120.0),
    ("r03", "A", "c2", 60.0),
    ("r04", "B", "c1", 300.0),
    ("r05", "A", "c2", 70.0),
    ("r06", "A", "c1", 130.0),
    ("r07", "A", "c2", 20000.0),
    ("r08", "B", "c1", 500.0),
    ("r09", "D", "c1", 12.5),
    ("r10", "D", "c2", 11.25),
    ("r11", "D", "c4", 10.625),
    ("r12", "A", "c1", 150.0),
    ("r13", "A", "c3", 90.0),
    ("r14", "C", "c1", 50.0),
    ("r15", "B", "c1", 400.0),
    ("r16", "D", "c5", 11.0),
]


def _rows() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    configs = [
        {"config_id": c, "node_type": f"n{v:g}", "vcpu_per_node": v, "memory_gb_per_node": 4 * v,
         "num_workers": w, "source": "test"}
        for c, (v, w) in CONFIGS.items()
    ]  # fmt: skip
    runs: list[dict[str, object]] = [
        {"run_id": r, "job_id": j, "cluster_config_id": c, "submit_time": T0 + timedelta(hours=i),
         "end_time": T0 + timedelta(hours=i, seconds=d), "duration_s": d, "status": "SUCCEEDED",
         "source": "test"}
        for i, (r, j, c, d) in enumerate(RUNS)
    ]  # fmt: skip
    failed = {**runs[0], "run_id": "f01", "status": "FAILED", "submit_time": T0}
    return configs, [*runs, failed]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[RunFacts]:
    db = tmp_path_factory.mktemp("baselines") / "w.duckdb"
    configs, rows = _rows()
    con = open_warehouse(db)
    insert_rows(con, "cluster_configs", configs)
    insert_rows(con, "runs", rows)
    con.close()
    with Sandbox.open(db) as box:
        labelled = [r[0] for r in box.query(LABELLED_SQL).rows]
        facts = as_facts(box.query(FACTS_SQL).rows)
    assert [f.run_id for f in facts] == labelled == [r[0] for r in RUNS]  # same runs, same order
    return facts


def test_job_median_falls_back_to_every_training_run(runs: list[RunFacts]) -> None:
    # A: 60 70 100 120 130 20000 -> 110; B: 300 500 -> 400; D: 11.25; C unseen: all 11 -> 100
    assert job_median(runs, CUT).tolist() == [110.0, 110.0, 100.0, 400.0, 11.25]


def test_job_config_median_falls_back_to_the_job(runs: list[RunFacts]) -> None:
    # (A, c1): 100 120 130 -> 120; A never ran on c3 nor D on c5: the job's median
    assert job_config_median(runs, CUT).tolist() == [120.0, 110.0, 100.0, 400.0, 11.25]


def test_last5_counts_only_runs_that_ended_before_the_submit(runs: list[RunFacts]) -> None:
    predicted = last5_median(runs, CUT).tolist()
    # r12 at 11:00: r07 (20 000 s from 06:00) still runs: 100 120 60 70 130 -> 100, not 120
    assert predicted[0] == 100.0
    # r13 at 12:00: the last five to end are r03 r05 r06 r12 (a holdout run) r07 -> 130
    assert predicted[1] == 130.0
    # C has no history (the job fallback, here the global median); B and D as their medians
    assert predicted[2:] == [100.0, 400.0, 11.25]


def test_online_job_median_sees_every_run_that_had_ended(runs: list[RunFacts]) -> None:
    # r12: A's 60 70 100 120 130 had ended (r07 still runs) -> 100; r13: also r07 (11:33) and
    # the holdout run r12 (11:02) -> 60 70 100 120 130 150 20000 -> 120; C none: static 100
    assert job_median_online(runs, CUT).tolist() == [100.0, 120.0, 100.0, 400.0, 11.25]


def test_online_pair_median_falls_back_to_the_online_job_median(runs: list[RunFacts]) -> None:
    # r12 (A, c1): r01 r02 r06 -> 120 (the job alone says 100); r13 (A, c3) and r16 (D, c5)
    # have no finished pair: the job's online median, 120 and 11.25
    assert job_config_median_online(runs, CUT).tolist() == [120.0, 120.0, 100.0, 400.0, 11.25]


def test_a_fold_fits_on_its_training_runs_alone(runs: list[RunFacts]) -> None:
    for predict in (job_median, job_config_median, ernest):
        assert predict_fold(predict, runs[:CUT], runs[CUT:]).tolist() == predict(runs, CUT).tolist()
    # second half predicted from the first, then the reverse: A's first-half runs r01-r06 and
    # r07 give r12/r13 their median 110; r01 from A's second-half runs r12 r13 -> 120 (r07 is in
    # the first half: 8 runs each)
    first, second = np.arange(8), np.arange(8, len(runs))
    found = dict(
        (n, p) for n, _, p in out_of_fold_baselines(runs, [(first, second), (second, first)])
    )
    assert list(found) == list(FOLD_BASELINES)
    assert not np.isnan(found["job_median"]).any()
    assert found["job_median"][[11, 12]].tolist() == [110.0, 110.0]
    assert found["job_median"][0] == 120.0


def test_ernest_fit_is_exact_on_three_points_and_never_negative() -> None:
    p = np.array([8.0, 16.0, 32.0])
    coef = ernest_fit(p, 10.0 + 20.0 / p)
    assert np.allclose(coef, [10.0, 20.0, 0.0, 0.0], atol=1e-9)  # unique: the null space of
    # the three rows has opposite signs on log P and P, so no other non-negative fit is exact
    noisy = np.array([2.0, 4.0, 8.0]), np.array([10.0, 30.0, 20.0])
    unconstrained = np.linalg.lstsq(ernest_terms(noisy[0]) / noisy[1][:, None], np.ones(3))[0]
    assert unconstrained.min() < 0 <= ernest_fit(*noisy).min()


def test_ernest_predicts_fitted_jobs_and_falls_back_for_the_rest(runs: list[RunFacts]) -> None:
    predicted = ernest(runs, CUT)
    assert predicted[4] == pytest.approx(10.0 + 20.0 / 64)  # D on 64 cores, from its exact fit
    # A: six runs on 8 and 16 cores; r13's zero-worker cluster of 8 vCPUs is 8 cores, as c1
    assert predicted[0] == predicted[1] > 0
    assert predicted[2:4].tolist() == [100.0, 400.0]  # C none, B two runs: job x config median
    one_size = [RunFacts(f"s{i}", "E", T0 + timedelta(hours=i), None, 10.0 + i, "c1",
                         {"vcpu_per_node": 4.0, "num_workers": 2}) for i in range(4)]  # fmt: skip
    assert ernest(one_size, 3).tolist() == [11.0]  # one cluster size: no fit, the median
    assert RunFacts("x", "E", T0, None, 1.0, "", {}).cores is None  # no cluster: no cores


def test_every_baseline_is_scored_on_the_holdout_runs(runs: list[RunFacts]) -> None:
    scored = score_baselines(runs, CUT)
    assert [b.name for b in scored] == [name for name, _, _ in BASELINES]
    assert all(b.metrics.n == len(RUNS) - CUT and b.as_dict()["runs"] == 5 for b in scored)
    # job x configuration: errors 30/150 (20 %: within), 20/90, 50/50, 0, 0.25/11 -> 3 of 5
    by_name = {b.name: b for b in scored}
    assert by_name["job_config_median"].metrics.within_20 == pytest.approx(3 / 5)
    expected = np.mean([30 / 150, 20 / 90, 50 / 50, 0, 0.25 / 11])
    assert by_name["job_config_median"].metrics.mape == pytest.approx(expected)
    assert best_baseline(scored) == min(scored, key=lambda b: b.metrics.mape).name
    for predict in (raw_lightgbm, raw_node_lightgbm):  # deterministic and positive
        first = predict(runs, CUT, 0)
        assert np.array_equal(first, predict(runs, CUT, 0)) and np.all(first > 0)


def test_a_cut_that_leaves_nothing_to_predict_is_an_error(runs: list[RunFacts]) -> None:
    from autofe.errors import ConfigError

    with pytest.raises(ConfigError, match="leaves nothing"):
        score_baselines(runs, len(runs))
